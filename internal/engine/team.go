package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// ErrUnreachable: the coordination store shared with other clones cannot
// be reached; nothing is granted until it is back, and asking again in a
// few seconds may work.
var ErrUnreachable = errors.New("coordination unreachable")

// team is the engine's side of the repository's live state (package
// coord, Options.Coord, always set): the repository's embedded one on this
// machine when snagd runs alone, a coordination store shared with the
// other clones on PostgreSQL when it runs with --coord.
//
// A grant is made there first, in one transaction, and mirrored in
// snag.db with the same epoch by the claim's own batch, which rewrites the
// file. A finish (a resolve, a verify's outcome that resolves the task or
// sends it to a person's review) is told to the store before its file is
// written (teamEndFirst): what the store has heard is what counts, and a
// clone that dies right after it, or is cut off, can never have the task
// granted again to another. Every other lease that a committed write of
// snag.db ends (a release, a holder gone, a person's move) is told to the
// store after the commit, in order, from an outbox that a store out of
// reach keeps until it is back; a grant waits for the changes it depends
// on, so the store never refuses a task as held by an end it has not
// heard yet. A change the store refuses is logged and audited, never
// dropped without a word.
//
// The link's background work (the heartbeat, the give-up, the sweep of
// silent clones, the sender and publication loops, the other clones'
// events, the reconcile) is the team service's, internal/engine/team,
// over the engine's seam (seam_team.go): the engine keeps this state,
// which every grant reads, the outbox and its delivery.
type team struct {
	s    coord.Live
	beat time.Duration

	mu     sync.Mutex // the outbox
	outbox []teamOp
	// The view's audit entries are sent to the store's log in the
	// background, read from snag.db after the last one the store took
	// (auditSent, -1 until the store said): a grant never waits for them,
	// and none is lost while the store is out of reach or snagd restarts.
	// auditLog names snag.db's log; entries up to auditFrom count as
	// sent (teamAuditLog). auditMu makes one sender at a time.
	auditMu   sync.Mutex
	auditLog  string
	auditFrom int64
	auditSent int64
	// endedFirst are the leases, by task id, whose end the store heard
	// before the commit that made it here (teamEndFirst), at their epoch:
	// the index's report of that end is not told again.
	endedFirst map[string]int64
	// kick wakes the team service's sender (TeamWakes).
	kick   chan struct{}
	sendMu sync.Mutex // one sender at a time, in order

	// lastBeat is when the store last took a heartbeat, in Unix nanoseconds.
	lastBeat atomic.Int64
	// gaveUp is set once this clone gave its leases up, cut off past the
	// grace, until it is back.
	gaveUp atomic.Bool
	// published is the DB's count of writes at the last publication of the
	// ready tasks.
	published atomic.Uint64
	pubDirty  atomic.Bool
	// pubs counts the publications that reached the store: a claim that
	// found nothing ready tries again when one was made since it looked.
	pubs  atomic.Uint64
	pubMu sync.Mutex // one publication at a time (teamPublish)
	// reconciled is set once this clone's leases in snag.db and in the
	// store were made to agree (at the start, and after a rejoin).
	reconciled atomic.Bool
	// started is set by the first reconcile, and stays set; startedCh is
	// closed then (Engine.WaitServing).
	started   atomic.Bool
	startedCh chan struct{}
	startOnce sync.Once
}

// teamOp is one change of the live state for the store, in order.
type teamOp struct {
	register *index.Session // a session opened
	endID    int64          // a session ended (with why)
	ended    *index.Ended   // a lease ended in snag.db
	// unend takes back a finish the store was told of first (teamEndFirst)
	// and that was not committed here, at its epoch: the task is free.
	unend *index.Ended
	adopt *index.Lease   // a session took a lease back by its name
	set   *teamSet       // a person moved a task no one held here
	files *teamFiles     // a session's file claims released
	post  *coord.Message // a report, handoff, note or inbox item for the team
	why   string
}

// teamFiles ends a session's file claims of paths (all of them when
// paths is empty).
type teamFiles struct {
	session int64
	paths   []string
}

// teamSet puts a task's shared lease in a state: a person's move decides
// for every clone.
type teamSet struct {
	id, key, state string
}

// DefaultHeartbeat is how often a clone heartbeats to the coordination
// store.
const DefaultHeartbeat = coord.DefaultHeartbeat

func newTeam(s coord.Live, beat time.Duration) *team {
	if beat <= 0 {
		// Five beats to a grace at least: a clone gives its leases up a
		// margin of beats before the grace ends (giveUpAfter), and one slow
		// beat must not make it.
		beat = min(DefaultHeartbeat, s.Grace()/5)
	}
	t := &team{s: s, beat: beat, kick: make(chan struct{}, 1), startedCh: make(chan struct{})}
	t.lastBeat.Store(time.Now().UnixNano())
	t.pubDirty.Store(true)
	return t
}

// across reports whether the live state is shared with clones on other
// machines (team mode): what the engine shows of the other members (the
// board's team section, a context's other agents, holders named with
// their machines) is shown then alone. The repository's other worktrees
// are shown through the Repository, with or without.
func (e *Engine) across() bool { return e.team.s.Across() }

// Coord is the live state the engine was opened with (Options.Coord).
func (e *Engine) Coord() coord.Live { return e.team.s }

func (t *team) queue(op teamOp) {
	t.mu.Lock()
	t.outbox = append(t.outbox, op)
	t.mu.Unlock()
	t.wake()
}

// wake has the sender send the outbox and the audit queue.
func (t *team) wake() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// audited is the index's hook after a commit that wrote audit entries:
// the sender sends them to the store's log.
func (t *team) audited([]snag.AuditEntry) { t.wake() }

// message is the index's hook after a commit that added a report or a
// handoff: the team reads it too.
func (e *Engine) teamMessage(m index.Message) {
	key := ""
	if m.TaskID != "" {
		if it, err := e.p.DB.Get(context.Background(), queue.Ref{ID: m.TaskID}); err == nil {
			key = it.Key
		}
	}
	e.team.queue(teamOp{post: &coord.Message{Kind: m.Kind, From: m.From, To: m.To, Key: key, Title: m.Title, Body: m.Body}})
}

// teamPost publishes a note or an inbox item added here, for the team to
// read before git carries the file.
func (e *Engine) teamPost(m coord.Message) {
	e.team.queue(teamOp{post: &m})
}

// ended is the index's hook after a commit that ended leases: the store
// hears each end, but for those it heard first (teamEndFirst).
func (t *team) ended(ls []index.Ended) {
	for i := range ls {
		t.mu.Lock()
		epoch, first := t.endedFirst[ls[i].TaskID]
		first = first && epoch == ls[i].Epoch
		if first {
			delete(t.endedFirst, ls[i].TaskID)
		}
		t.mu.Unlock()
		if !first {
			t.queue(teamOp{ended: &ls[i]})
		}
	}
}

func coordSession(s index.Session) coord.Session {
	return coord.Session{ID: s.ID, Name: s.Name, Client: s.Client, Branch: s.Branch}
}

// send tells the store every change in the outbox, in order. It stops at
// the first that cannot reach the store, which stays first.
func (e *Engine) teamSend(ctx context.Context) error {
	t := e.team
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	for {
		t.mu.Lock()
		if len(t.outbox) == 0 {
			t.mu.Unlock()
			return nil
		}
		op := t.outbox[0]
		t.mu.Unlock()
		err := e.teamApply(ctx, op)
		if errors.Is(err, coord.ErrUnreachable) || ctx.Err() != nil {
			return err
		}
		if op.register != nil && errors.Is(err, coord.ErrNameTaken) && e.teamRename(ctx, op.register) {
			continue // registered again under a free name
		}
		if (op.unend != nil || op.ended != nil) && errors.Is(err, coord.ErrCloneEnded) {
			return err // sent again once this clone has joined again
		}
		if err != nil && !errors.Is(err, coord.ErrStale) {
			// Refused for good (this clone was ended meanwhile, say): the
			// store's own sweep has freed what it held. Said, and audited:
			// never dropped without a word.
			e.log.Warn("the coordination store refused a change: it is not sent again", "change", op.String(), "err", err)
			e.Audit(ctx, snag.AuditEntry{Actor: queue.System, Action: "coord", Outcome: "refused",
				Detail: op.String() + ": " + err.Error()})
		}
		// Taken out by itself, not as the first: a rejoin meanwhile may
		// have dropped it (TeamRejoined, from the team service's
		// heartbeat), and the first is then another change, which must
		// not be lost unsent.
		t.mu.Lock()
		if i := slices.Index(t.outbox, op); i >= 0 {
			t.outbox = slices.Delete(t.outbox, i, i+1)
		}
		t.mu.Unlock()
	}
}

// teamSendEnds sends the outbox now, in order, when it holds the end of
// one of sessions ids, which this clone has just ended to free their
// name: the registration or adoption that follows asks the store whether
// the name is free, and the store must have heard the end first, or it
// answers that the name is taken and the agent is named anew. The
// sender's loop would send the same changes in the same order, later.
// With the store out of reach the ends wait in the outbox, as every
// change does.
func (e *Engine) teamSendEnds(ctx context.Context, ids []int64) {
	if len(ids) == 0 || e.team.cutOff() > 0 {
		return
	}
	if e.team.waiting(func(op teamOp) bool { return slices.Contains(ids, op.endID) }) {
		e.teamSend(ctx)
	}
}

// String names the change for the log and the audit.
func (op teamOp) String() string {
	switch {
	case op.register != nil:
		return fmt.Sprintf("register session %d (%s)", op.register.ID, op.register.Name)
	case op.endID != 0:
		return fmt.Sprintf("end session %d", op.endID)
	case op.set != nil:
		return fmt.Sprintf("set %s %s", op.set.key, op.set.state)
	case op.post != nil:
		return "post a " + op.post.Kind
	case op.files != nil:
		return fmt.Sprintf("release the file claims of session %d", op.files.session)
	case op.adopt != nil:
		return fmt.Sprintf("adopt the lease of %s at epoch %d", op.adopt.TaskID, op.adopt.Epoch)
	case op.ended != nil:
		return fmt.Sprintf("end the lease of %s at epoch %d", op.ended.TaskID, op.ended.Epoch)
	case op.unend != nil:
		return fmt.Sprintf("take back the end of %s at epoch %d", op.unend.TaskID, op.unend.Epoch)
	}
	return "nothing"
}

// teamRename gives session *s, whose name a live session of another clone
// has (a registration that waited in the outbox), a free name here, and
// reports whether it did: the registration is then sent again.
func (e *Engine) teamRename(ctx context.Context, s *index.Session) bool {
	var name string
	for try := 0; ; try++ {
		var err error
		if name, err = e.teamFreeName(ctx, s.Name); err != nil {
			return false
		}
		err = e.p.DB.Rename(ctx, s.ID, name)
		if err == nil {
			break
		}
		if !errors.Is(err, index.ErrNameTaken) || try == 10 {
			return false // taken here meanwhile, ten times over: the next start registers it again
		}
	}
	e.live.ended(s.ID) // the kept copy has the old name
	e.log.Warn("an agent's name was live on another clone: renamed", "session", s.ID, "was", s.Name, "now", name)
	e.Audit(ctx, snag.AuditEntry{SessionID: s.ID, Actor: queue.System, Agent: name, Action: "rename", Outcome: "ok",
		Detail: s.Name + " was live on another clone: renamed " + name})
	renamed := *s
	renamed.Name = name
	*s = renamed
	return true
}

func (e *Engine) teamApply(ctx context.Context, op teamOp) error {
	s := e.team.s
	switch {
	case op.register != nil:
		return s.Register(ctx, coordSession(*op.register))
	case op.endID != 0:
		_, err := s.EndSession(ctx, op.endID, op.why)
		return err
	case op.set != nil:
		return s.Set(ctx, op.set.id, op.set.key, op.set.state, op.why)
	case op.post != nil:
		return s.Post(ctx, *op.post)
	case op.files != nil:
		return s.ReleaseFiles(ctx, op.files.session, op.files.paths, op.why)
	case op.adopt != nil:
		return s.Adopt(ctx, op.adopt.TaskID, op.adopt.Epoch, coord.Session{ID: op.adopt.SessionID, Name: op.adopt.Holder})
	case op.unend != nil:
		if e.endState(ctx, op.unend.TaskID) == coord.Done {
			return nil // finished here since, after all: the end stands
		}
		return s.Unend(ctx, op.unend.TaskID, op.unend.Epoch, coord.Session{}, false)
	case op.ended != nil:
		state := e.endState(ctx, op.ended.TaskID)
		err := s.End(ctx, op.ended.TaskID, op.ended.Epoch, state, op.ended.Reason)
		if !errors.Is(err, coord.ErrStale) && !errors.Is(err, coord.ErrCloneEnded) {
			return err
		}
		if state == coord.Done {
			// Finished here, and the lease moved in the store meanwhile (the
			// clone was swept, and joined again): done all the same unless a
			// grant went past it.
			_, err = s.MarkDone(ctx, op.ended.TaskID, op.ended.Epoch, op.ended.Reason)
			return err
		}
		// Freed here, and the store has the lease otherwise: a finish it
		// heard from this clone whose answer was lost (the link cut in the
		// middle of the call) left it done at this epoch while no file
		// says so. The task is open here, so it is free again; Unend
		// changes nothing unless the store has it done at exactly this
		// epoch. A clone ended meanwhile sends it once joined again.
		return s.Unend(ctx, op.ended.TaskID, op.ended.Epoch, coord.Session{}, false)
	}
	return nil
}
