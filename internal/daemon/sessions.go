package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/snag"
)

// IdleAfter is how long a session goes without a tool call, with nothing
// in flight, before it is shown as idle.
const IdleAfter = 5 * time.Minute

// sessionView is a live session as GET /sessions gives it: the row and
// what snagd sees of it now.
type sessionView struct {
	index.Session
	Activity snag.Activity `json:"activity"`
}

// activities says what each live session is doing, by session id.
func (d *Daemon) activities(ss []index.Session) map[int64]snag.Activity {
	now := time.Now()
	var web map[int64]mcpState
	if d.mcp != nil {
		web = d.mcp.states()
	}
	out := make(map[int64]snag.Activity, len(ss))
	for _, s := range ss {
		var a snag.Activity
		if v, ok := d.calls.Load(s.ID); ok {
			a.LastCall = v.(time.Time)
		}
		last := a.LastCall
		if last.IsZero() {
			last = s.Started
		}
		since := now.Sub(last).Round(time.Second)
		st, isWeb := web[s.ID]
		ends, byHandle := d.w.Sessions.HeldUntil(s.ID)
		switch {
		case byHandle:
			a.Stream, a.EndsAt = "handle", ends
			a.Idle = since >= IdleAfter
			a.Note = fmt.Sprintf("known by its handle (no connection): it ends in %s unless a call names it, and its leases go back",
				until(now, ends))
		case !isWeb:
			a.Idle = since >= IdleAfter
			a.Note = "connected (holds its stream)"
			if !d.w.Sessions.StreamOpen(s.ID) {
				a.Note = "holds no stream: it ends only when its process is gone or a person ends it"
			}
		case st.Stream:
			a.Stream, a.Working = "open", st.Working
			a.Idle = !st.Working && since >= IdleAfter
			a.Note = "connected (holds its GET stream)"
		case st.Working:
			a.Stream, a.Working = "none", true
			if st.Held {
				a.Stream = "closed"
			}
			a.Note = "answering a request"
		case st.Held:
			a.Stream, a.Idle, a.EndsAt = "closed", true, st.Ends
			a.Note = fmt.Sprintf("its GET stream closed %s ago and no request came since: the client has gone without ending its session; it ends in %s unless a request comes",
				ago(now, st.Last), until(now, st.Ends))
		default:
			a.Stream, a.Idle, a.EndsAt = "none", true, st.Ends
			a.Note = fmt.Sprintf("no request for %s and no GET stream: it ends in %s unless a request comes", ago(now, st.Last), until(now, st.Ends))
		}
		if a.Idle && a.Stream != "closed" && a.Stream != "none" {
			a.Note = fmt.Sprintf("idle: no tool call for %s; %s", since, a.Note)
		}
		out[s.ID] = a
	}
	return out
}

func ago(now, t time.Time) time.Duration { return max(now.Sub(t), 0).Round(time.Second) }

func until(now, t time.Time) time.Duration { return max(t.Sub(now), 0).Round(time.Second) }

const endRefusal = "a person ends an agent's session; an agent ends its own by disconnecting"

// endForPerson ends live session id for a person, by, with a reason, and
// closes its MCP session over HTTP, if it has one: the client's next
// request gets 404.
func (d *Daemon) endForPerson(ctx context.Context, id int64, by, reason string) (string, int, error) {
	if d.mcp != nil {
		defer d.mcp.closeSession(id)
	}
	return d.e.EndForPerson(ctx, id, by, reason)
}
