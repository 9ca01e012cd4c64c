package snag

import (
	"time"
)

// Session is an agent's session: the answer of POST /sessions (201) and a
// part of GET /sessions. Every later request of the agent sends its ID in
// the session header.
type Session struct {
	// ID names the session in the session header.
	ID int64 `json:"id"`
	// Name is the agent's name (ALICE, BOB, ...), as task files and the
	// audit log show it.
	Name string `json:"name"`
	// Client is the MCP client's name.
	Client string `json:"client,omitempty"`
	// ClientVersion is its version.
	ClientVersion string `json:"client_version,omitempty"`
	// PID is the agent's process id.
	PID int `json:"pid,omitempty"`
	// PIDStart is the process's start time, in clock ticks since boot.
	PIDStart int64 `json:"pid_start,omitempty"`
	// BootID is the boot the process runs in.
	BootID string `json:"boot_id,omitempty"`
	// Host is the machine the agent runs on.
	Host string `json:"host,omitempty"`
	// Transport is stdio or http.
	Transport string `json:"transport,omitempty"`
	// Root is the project root the agent works in, or "" for the
	// daemon's own.
	Root string `json:"root,omitempty"`
	// Started is when the session was registered.
	Started time.Time `json:"started"`
	// LastSeen is when snagd last heard from it.
	LastSeen time.Time `json:"last_seen"`
	// Ended is when it ended; zero while it lives.
	Ended time.Time `json:"ended,omitzero"`
	// EndReason says why it ended.
	EndReason string `json:"end_reason,omitempty"`
}

// Activity is what snagd sees of a live session at the moment it is asked;
// it is not stored.
type Activity struct {
	// LastCall is when the session's latest tool call came (zero: none
	// since snagd started).
	LastCall time.Time `json:"last_call,omitzero"`
	// Idle is true when no call came for a while and nothing is in flight.
	Idle bool `json:"idle"`
	// Working is true while a request of the session is being answered.
	Working bool `json:"working,omitempty"`
	// Stream, for an MCP session over HTTP: open while the client holds
	// its GET stream, closed once it held one and no longer does, none
	// when it never opened one; handle for an agent no connection stands
	// for (MCP 2026-07-28), which lives while calls name its handles;
	// empty for other sessions.
	Stream string `json:"stream,omitempty"`
	// EndsAt, for an MCP session over HTTP with nothing in flight, or an
	// agent known by its handle: when snagd ends it (and releases its
	// tasks) unless a request comes (that names its handle).
	EndsAt time.Time `json:"ends_at,omitzero"`
	// Note says it in a sentence.
	Note string `json:"note"`
}

// LiveSession is a live session and what it is doing, in GET /sessions.
type LiveSession struct {
	Session
	// Activity is what it is doing now.
	Activity Activity `json:"activity"`
}

// Lease is a task held by a session.
type Lease struct {
	// TaskID is the task's ULID.
	TaskID string `json:"task_id"`
	// SessionID is the holder's session.
	SessionID int64 `json:"session_id"`
	// Holder is the holder's name.
	Holder string `json:"holder"`
	// Epoch fences the lease.
	Epoch int64 `json:"epoch"`
	// Acquired is when it was granted.
	Acquired time.Time `json:"acquired"`
	// Detached is set for a lease re-derived from the files that no live
	// session holds.
	Detached bool `json:"detached,omitempty"`
	// Worktree is the git worktree made for the lease, where its agent
	// works and its verify runs.
	Worktree string `json:"worktree,omitempty"`
}
