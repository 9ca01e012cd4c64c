// Package snag holds the domain's values as snag reports them: a task as
// lists show it and its detail, a search hit, the queue's counts, a
// session, its activity and its leases, file and branch claims, messages,
// the audit log's entries, verify runs and their state, plans, notes and
// their links, task worktrees, and the events snagd announces on
// GET /events, one type per kind (Event). The index, the live store and the
// engine return them; the operations (package ops) carry them; the wire
// contract (package api) names them through aliases. Their JSON tags are
// the wire's names.
//
// Task is also the row of the index's tasks table, declared once: a
// field's db tag names its column there, which the index reads into the
// field and writes from the task a file holds (package index builds its
// column lists from the tags); with ",readonly" the index keeps the column
// itself (the file's path, whether it reads cleanly, duplicates) and a
// parsed task does not set it. A field without the tag is worked out when
// the row is read. A db field is a string, an int or a bool, or a type of
// one of those. A new column in snag list is a migration, a tagged field
// here, the line in package index that computes it from the task file,
// and the CLI's column.
//
// It is values alone: no I/O, and it must not import any package of
// snag's but queue (the task file and its status machine).
package snag
