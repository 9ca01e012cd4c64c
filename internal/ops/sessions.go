package ops

import (
	"github.com/snagdev/snag/internal/snag"
)

// Registration is the body of POST /sessions: what an agent tells snagd
// about itself.
type Registration struct {
	// Name asks for a name; snagd gives it when no live session has it,
	// else the next free one.
	Name string `json:"name,omitempty"`
	// Client is the MCP client's name.
	Client string `json:"client,omitempty"`
	// ClientVersion is its version.
	ClientVersion string `json:"client_version,omitempty"`
	// PID is the agent's process id, so snagd ends the session when the
	// process is gone.
	PID int `json:"pid,omitempty"`
	// Host is the machine the agent runs on.
	Host string `json:"host,omitempty"`
	// Transport is stdio or http.
	Transport string `json:"transport,omitempty"`
	// Root is the project root the agent works in, when that is another
	// worktree of the daemon's repository: verify commands run there.
	Root string `json:"root,omitempty"`
}

// Sessions is the answer of GET /sessions: the live sessions and every
// live lease.
type Sessions struct {
	// Leases are the live leases; [] when none.
	Leases []snag.Lease `json:"leases"`
	// Sessions are the live sessions, oldest first; [] when none.
	Sessions []snag.LiveSession `json:"sessions"`
}

// EndRequest is the body of POST /sessions/{id}/end: a person ends an
// agent's session.
type EndRequest struct {
	// ID is the session's id.
	ID int64 `json:"-" path:"id" code:"bad_session"`
	// By is the person, for the audit log.
	By string `json:"by,omitempty"`
	// Reason says why.
	Reason string `json:"reason,omitempty"`
}

// Ended is the answer of POST /sessions/{id}/end.
type Ended struct {
	// Ended is always true.
	Ended bool `json:"ended"`
	// ID is the session that ended.
	ID int64 `json:"id"`
	// Name is its agent's name.
	Name string `json:"name"`
	// Released counts the tasks that went back to the queue.
	Released int `json:"released"`
}
