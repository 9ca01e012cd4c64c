package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/proc"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// sessionBranch is the branch checked out where a local session works
// (its worktree, or snagd's own), for the activity by branch; a session
// over HTTP may work anywhere, and keeps the branch its writes named.
func (e *Engine) sessionBranch(s index.Session) string {
	if s.Transport == "http" {
		return s.Branch
	}
	top := s.Root
	if top == "" {
		top = e.root
	}
	b, _, _ := gitdir.Head(top)
	return b
}

// adoptSessions gives every session live in the database (from before a
// restart) the grace to reconnect: the sessions service keeps it (OnAdopt).
func (e *Engine) adoptSessions(ctx context.Context) {
	if e.adopt == nil {
		return
	}
	ss, err := e.p.DB.LiveSessions(ctx)
	if err != nil {
		e.log.Error("live sessions", "err", err)
		return
	}
	for _, s := range ss {
		e.adopt(s.ID, s.Expires)
	}
}

// EndForPerson ends live session id for a person, by, with a reason (an
// agent that is gone without saying so, or one to stop): its tasks go back
// to the queue and the audit log says who. It returns the session's name
// and how many tasks went back.
func (e *Engine) EndForPerson(ctx context.Context, id int64, by, reason string) (string, int, error) {
	s, err := e.p.DB.SessionByID(ctx, id)
	if err != nil || !s.Ended.IsZero() {
		return "", 0, refuse(ErrNotFound, "no_session", "no live session %d: snag agents lists the live ones", id)
	}
	held, _ := e.p.DB.LeasesOf(ctx, id)
	if by == "" {
		by = "person"
	}
	why := "ended by " + by
	if reason != "" {
		why += ": " + reason
	}
	e.Audit(ctx, snag.AuditEntry{SessionID: id, Actor: queue.Person, Agent: by, Action: "session_end",
		Outcome: "ok", Detail: fmt.Sprintf("%s (holding %d): %s", s.Name, len(held), why)})
	e.EndSession(id, why)
	return s.Name, len(held), nil
}

// Adopt gives session s the name it asks for (index.DB.Adopt): the
// identity an agent takes up in its first snag_context. It returns the
// session as it now is.
func (e *Engine) Adopt(ctx context.Context, s index.Session, name string) (index.Session, error) {
	name = strings.ToUpper(strings.TrimSpace(name))
	if err := validName(name); err != nil {
		return s, err
	}
	if name != s.Name {
		e.endGoneNamed(ctx, name)
	}
	got, err := e.p.DB.Adopt(ctx, s.ID, name)
	entry := snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: name, Action: "adopt", Outcome: "ok", Detail: "was " + s.Name}
	switch {
	case errors.Is(err, index.ErrNamed), errors.Is(err, index.ErrNameTaken):
		entry.Agent, entry.Outcome, entry.Detail = s.Name, "refused", err.Error()
		e.Audit(ctx, entry)
		return s, refuse(ErrInvalid, "name_kept", "you stay %s: %v", s.Name, err)
	case err != nil:
		return s, err
	}
	if got.Name != s.Name && e.team.cutOff() == 0 {
		// The name is the workspace's: one live agent of another clone
		// may have it.
		if err := e.team.s.Register(ctx, coordSession(got)); errors.Is(err, coord.ErrNameTaken) {
			if rerr := e.p.DB.Rename(ctx, s.ID, s.Name); rerr != nil {
				return s, rerr
			}
			e.live.ended(s.ID)
			entry.Agent, entry.Outcome, entry.Detail = s.Name, "refused", err.Error()
			e.Audit(ctx, entry)
			return s, refuse(ErrInvalid, "name_kept", "you stay %s: %s", s.Name, strings.TrimPrefix(err.Error(), coord.ErrNameTaken.Error()+": "))
		}
	}
	if got.Name != s.Name {
		e.live.ended(s.ID) // the kept copy has the old name
		e.Audit(ctx, entry)
		e.hub.Publish(snag.SessionEvent{ID: s.ID, Name: got.Name, Was: s.Name})
	}
	return got, nil
}

// validName checks a name an agent asks for: letters, digits and - _,
// at most 32, starting with a letter.
func validName(n string) error {
	ok := n != "" && len(n) <= 32 && n[0] >= 'A' && n[0] <= 'Z'
	for _, r := range n {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			ok = false
		}
	}
	if !ok {
		return refuse(ErrInvalid, "bad_name", "name %q: use letters, digits, - and _, at most 32, starting with a letter (like ORCA or ada-2)", n)
	}
	return nil
}

// Register records a new session, or gives a session that asked for a
// name that ended or detached the name back (index.DB.Register), and
// returns it. A session of this host with a pid has the pid's start time
// and the boot recorded, so the sweep can tell when its process is gone.
func (e *Engine) Register(ctx context.Context, s index.Session) (index.Session, error) {
	s.Name = strings.ToUpper(strings.TrimSpace(s.Name))
	s.Root = e.sessionRoot(s.Root)
	s.Branch = e.sessionBranch(s)
	if s.Host == "" {
		s.Host, _ = os.Hostname()
	}
	if local, _ := os.Hostname(); s.PID > 0 && s.Host == local {
		s.PIDStart = proc.Start(s.PID)
		s.BootID = proc.BootID()
	}
	e.endGoneNamed(ctx, s.Name)
	if e.team.cutOff() == 0 {
		// A new agent takes no name a live agent of another clone has:
		// the team's holders and handoffs name agents by name alone.
		if names, err := e.team.s.LiveNames(ctx); err == nil {
			s.Avoid = names
		}
	}
	if r := e.opts.Repository; r != nil {
		// One live name per repository: an agent in another worktree has
		// this one. Registered under the repository's lock, so two
		// worktrees' agents starting at once never get one name.
		r.namesMu.Lock()
		defer r.namesMu.Unlock()
		s.Avoid = append(s.Avoid, r.liveNames(ctx, e)...)
	}
	s, err := e.p.DB.Register(ctx, s)
	if err != nil {
		return s, err
	}
	e.Audit(ctx, snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "session",
		Outcome: "ok", Detail: fmt.Sprintf("%s %s pid %d", s.Client, s.ClientVersion, s.PID)})
	s = e.teamRegister(ctx, s)
	// A session that took its name's leases back (after a rebuilt
	// index) holds them in the store too.
	if ls, err := e.p.DB.LeasesOf(ctx, s.ID); err == nil {
		for i := range ls {
			e.team.queue(teamOp{adopt: &ls[i]})
		}
	}
	e.hub.Publish(snag.SessionEvent{ID: s.ID, Name: s.Name, Started: true})
	return s, nil
}

// endGoneNamed ends the live sessions named name whose processes are gone,
// as the sweep would within seconds: an agent started again that asks for
// its name gets it at its first ask, not a sweep later. Their tasks go
// back to the queue, as when the sweep finds them, and the live state
// hears of their ends before it returns (teamSendEnds): until it does,
// it has the name live and refuses it to the agent started again.
func (e *Engine) endGoneNamed(ctx context.Context, name string) {
	if name == "" {
		return
	}
	ss, err := e.p.DB.LiveSessions(ctx)
	if err != nil {
		return
	}
	var ended []int64
	for _, s := range ss {
		if s.Name == name && !proc.Alive(s.PID, s.PIDStart, s.BootID) {
			e.EndSession(s.ID, "process gone")
			ended = append(ended, s.ID)
		}
	}
	e.teamSendEnds(ctx, ended)
}

// Session returns live session id, or an ErrSessionEnded refusal. Its
// LastSeen is when it was first looked up.
func (e *Engine) Session(ctx context.Context, id int64) (index.Session, error) {
	s, ok, gen := e.live.lookup(id)
	if ok {
		return s, nil
	}
	s, err := e.p.DB.SessionByID(ctx, id)
	if err != nil || !s.Ended.IsZero() {
		return index.Session{}, refuse(ErrSessionEnded, "session_ended",
			"session %d has ended (its leases were released): register again", id)
	}
	e.live.keep(s, gen)
	return s, nil
}

// liveSessions keeps the live sessions that requests named, so that a
// request's check of its session reads no row: a read on a pooled
// connection after any write drops that connection's whole page cache.
// A session ends only through EndSession, which lets it go here once
// snag.db says so, and never lives again (a session that registers
// again gets a new id).
type liveSessions struct {
	mu   sync.Mutex
	m    map[int64]index.Session
	ends uint64 // how many sessions have ended: a read from before an end is not kept
}

// lookup returns session id when it is kept, and otherwise the count of
// ends to pass to keep.
func (l *liveSessions) lookup(id int64) (index.Session, bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.m[id]
	return s, ok, l.ends
}

// keep keeps live session s, read after lookup returned ends, unless a
// session has ended since.
func (l *liveSessions) keep(s index.Session, ends uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ends != ends {
		return
	}
	if l.m == nil {
		l.m = map[int64]index.Session{}
	}
	l.m[s.ID] = s
}

// ended lets session id go, once snag.db records its end.
func (l *liveSessions) ended(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id)
	l.ends++
}

// Touch records that session id is alive now.
func (e *Engine) Touch(ctx context.Context, id int64) { e.p.DB.Touch(ctx, id) }

// EndSession ends a session and gives back every task it held.
func (e *Engine) EndSession(id int64, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return
	}
	held, err := e.p.DB.EndSession(ctx, id, why)
	e.live.ended(id) // when the end failed too: the next request reads the row
	e.forgetGaveBack(id)
	e.team.queue(teamOp{endID: id, why: why})
	if err != nil {
		e.log.Error("end session", "id", id, "err", err)
		return
	}
	for _, l := range held {
		if e.verify.inFlight(l.TaskID) {
			// A check of its work is running: the outcome decides where the
			// task goes (a failure sends it back to the queue, as the holder
			// is gone); the lease has ended with the session.
			err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
				if _, _, err := tx.End(l.TaskID, "holder gone during verify: "+why); err != nil {
					return err
				}
				return tx.Audit(snag.AuditEntry{SessionID: id, Actor: queue.System, Agent: l.Holder, Action: "release",
					TaskID: l.TaskID, Outcome: "ok", Detail: "holder gone during verify (the outcome decides where the task goes): " + why})
			})
			if err != nil {
				e.log.Error("end a gone session's lease", "task", l.TaskID, "err", err)
			}
			continue
		}
		if err := e.releaseLocked(ctx, l.TaskID, queue.System, l.Holder, "holder gone: "+why); err != nil {
			e.log.Error("release of a gone session's task", "task", l.TaskID, "err", err)
		}
	}
	e.hub.Publish(snag.SessionEvent{ID: id, Ended: true, Reason: why, Released: new(len(held))})
	e.writePlan(ctx)
}
