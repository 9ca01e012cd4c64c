package index

import (
	"encoding/hex"

	"github.com/snagdev/snag/internal/snag"
)

// This file is where the index's rows become the domain's values (package
// snag), which the API carries: snagd's answers and the CLI's reads
// without a daemon both go through it, so the wire contract changes only
// when a field is added here on purpose.

// Wire is the row as the API gives it: the task it holds, as it is.
func (r *Row) Wire() snag.Task { return r.Task }

// WireRows is rows as the API gives them; [] for none.
func WireRows(rows []*Row) []snag.Task {
	out := make([]snag.Task, len(rows))
	for i, r := range rows {
		out[i] = r.Wire()
	}
	return out
}

// Wire is the hit as the API gives it.
func (h *Hit) Wire() snag.Hit { return snag.Hit{Task: h.Row.Wire(), Snippet: h.Snippet} }

// WireHits is hits as the API gives them; nil stays nil.
func WireHits(hits []Hit) []snag.Hit {
	if hits == nil {
		return nil
	}
	out := make([]snag.Hit, len(hits))
	for i := range hits {
		out[i] = hits[i].Wire()
	}
	return out
}

// Wire is the session as the API gives it.
func (s Session) Wire() snag.Session {
	return snag.Session{ID: s.ID, Name: s.Name, Client: s.Client, ClientVersion: s.ClientVersion, PID: s.PID,
		PIDStart: s.PIDStart, BootID: s.BootID, Host: s.Host, Transport: s.Transport, Root: s.Root,
		Started: s.Started, LastSeen: s.LastSeen, Ended: s.Ended, EndReason: s.EndReason}
}

// Wire is the lease as the API gives it.
func (l Lease) Wire() snag.Lease {
	return snag.Lease{TaskID: l.TaskID, SessionID: l.SessionID, Holder: l.Holder, Epoch: l.Epoch, Acquired: l.Acquired,
		Detached: l.Detached, Worktree: l.Worktree}
}

// WireLeases is leases as the API gives them; [] for none.
func WireLeases(ls []Lease) []snag.Lease {
	out := make([]snag.Lease, len(ls))
	for i, l := range ls {
		out[i] = l.Wire()
	}
	return out
}

// Wire is the item as GET /tasks/{ref} gives it, without its verify state;
// taskFile is its file relative to the project root.
func (it *Item) Wire(taskFile string) snag.TaskDetail {
	out := snag.TaskDetail{Row: it.Row.Wire(), Task: it.Task, TaskFile: taskFile, SHA256: hex.EncodeToString(it.SHA256)}
	if it.Task != nil {
		body := string(it.Task.Body)
		out.Body = &body
	}
	return out
}

// Wire is the message as the API answers it.
func (m Message) Wire() snag.Message {
	return snag.Message{ID: m.ID, Created: m.Created, Kind: m.Kind, From: m.From, To: m.To, TaskID: m.TaskID,
		Title: m.Title, Body: m.Body, Detail: m.Detail, Seen: m.Seen}
}

// WireMessages is ms as the API answers them, [] when none.
func WireMessages(ms []Message) []snag.Message {
	out := make([]snag.Message, len(ms))
	for i, m := range ms {
		out[i] = m.Wire()
	}
	return out
}
