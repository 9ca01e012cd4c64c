// Package mcp serves snag's queue to agents over the Model Context Protocol
// (DESIGN section 9): the eight snag_ tools of the queue toolset and the
// snag:// resources, each answer a compact text written for a model plus
// structuredContent that matches the tool's output schema.
//
// The tools work against [Backend], a small interface that two readers
// meet: [Daemon], which makes every call one of snagd's operations
// (package ops) over a [Link] and keeps the epochs of the session's
// leases, and [Files], which reads .snag/ with the queue package when no
// daemon answers (reads only, labelled source "files"). A Link is snagd
// over HTTP for the stdio bridge (package remote) or in process for
// snagd's own /mcp. Every task carries its trust tier; text an agent or a
// tool wrote is fenced and labelled as data.
//
// mcp must not import index, project, cli, watch, SQLite or fsnotify: it
// never opens snag.db and never writes a task file.
package mcp
