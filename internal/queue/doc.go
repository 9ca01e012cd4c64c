// Package queue is snag's domain: tasks, their statuses and the moves between
// them, ids and aliases, the markdown codec that reads and edits task files
// (and notes and plans), the project's config.json, and the generated
// plan.json. It does no I/O but read config.json: the files are reached
// through package taskfs.
//
// A task file is markdown with YAML frontmatter. The file is the source of
// truth, and snag edits it the way a careful person would: it rewrites only
// the scalar tokens it changes (status, assignee, updated, ...), appends a
// missing key before the closing delimiter, and leaves unknown keys, comments,
// key order, quoting, line endings and the body byte for byte as they were.
//
// Parsing is defensive. Size limits are checked before any YAML is decoded;
// anchors, aliases, merge keys, custom tags and duplicate keys are refused;
// a file that breaks a rule yields a *ParseError naming the line, the field
// and the fix, and is never rewritten.
//
// queue is the innermost package: it imports no other package of snag's, and
// none of SQLite, fsnotify or the MCP SDK. A test keeps it so.
package queue
