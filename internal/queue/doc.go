// Package queue is snag's domain: tasks, their statuses and the moves between
// them, ids and aliases, file names, notes and plans as values, the
// project's config.json, and the generated plan.json. The bytes of the
// files are package codec's, and the files themselves package taskfs's.
//
// queue is the innermost package: it imports no other package of snag's, and
// none of SQLite, fsnotify or the MCP SDK. A test keeps it so.
package queue
