// Package codec reads and edits the bytes of snag's markdown files: task
// files, notes and plans (YAML frontmatter over a markdown body), and
// merges two sides of a task file. It does no I/O: the file store
// (package taskfs) reads and writes the bytes, the domain (package queue)
// is what they mean.
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
package codec
