package api

import (
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// Registration is ops.Registration: the body of POST /sessions: what an
// agent tells snagd about itself.
type Registration = ops.Registration

// Session is snag.Session: an agent's session: the answer of POST /sessions
// (201) and a part of GET /sessions.
type Session = snag.Session

// Activity is snag.Activity: what snagd sees of a live session at the moment
// it is asked; it is not stored.
type Activity = snag.Activity

// LiveSession is snag.LiveSession: a live session and what it is doing, in
// GET /sessions.
type LiveSession = snag.LiveSession

// Lease is snag.Lease: a task held by a session.
type Lease = snag.Lease

// Sessions is ops.Sessions: the answer of GET /sessions: the live sessions
// and every live lease.
type Sessions = ops.Sessions

// EndRequest is ops.EndRequest: the body of POST /sessions/{id}/end: a
// person ends an agent's session.
type EndRequest = ops.EndRequest

// Ended is ops.Ended: the answer of POST /sessions/{id}/end.
type Ended = ops.Ended
