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
// It is values alone: no I/O, and it must not import any package of
// snag's but queue (the task file and its status machine).
package snag
