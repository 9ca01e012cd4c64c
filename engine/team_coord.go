package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snagdev/snag/coord"
	"github.com/snagdev/snag/gitdir"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/queue"
)

// ErrUnreachable: the coordination store shared with other clones cannot
// be reached; nothing is granted until it is back, and asking again in a
// few seconds may work.
var ErrUnreachable = errors.New("coordination unreachable")

// team is the engine's side of a coordination store shared with the
// other clones of the repository (package coord, on PostgreSQL): set when
// snagd runs with --coord, nil when it runs alone.
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
	kick       chan struct{}
	// recon asks the reconcile loop for a reconcile (at the start, after
	// a rejoin, and after one that could not finish).
	recon  chan struct{}
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
	// started is set by the first reconcile, and stays set.
	started atomic.Bool
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
	t := &team{s: s, beat: beat, kick: make(chan struct{}, 1), recon: make(chan struct{}, 1)}
	t.lastBeat.Store(time.Now().UnixNano())
	t.pubDirty.Store(true)
	return t
}

// across reports whether the live state is shared with clones on other
// machines (team mode): what the engine shows of the other members (the
// board's team section, a context's other agents, holders named with
// their machines) is shown then alone. The repository's other worktrees
// are shown through the Repository, with or without.
func (e *Engine) across() bool { return e.team != nil && e.team.s.Across() }

// Coord is the coordination store snagd shares with other clones, or nil
// when it runs alone.
func (e *Engine) Coord() coord.Live {
	if e.team == nil {
		return nil
	}
	return e.team.s
}

func (t *team) queue(op teamOp) {
	t.mu.Lock()
	t.outbox = append(t.outbox, op)
	t.mu.Unlock()
	t.wake()
}

// askReconcile has the reconcile loop reconcile this clone's leases.
func (t *team) askReconcile() {
	select {
	case t.recon <- struct{}{}:
	default:
	}
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
func (t *team) audited([]index.AuditEntry) { t.wake() }

// teamAuditLog names this view's audit log for the store. An index that
// had entries before its log had a name sent them to a team's store
// already (snag before the log names): those count as sent there, while
// the embedded store takes them all, the earlier history of snag log.
func (e *Engine) teamAuditLog(ctx context.Context) error {
	id, from, err := e.p.DB.AuditLogID(ctx, e.team.s.Across())
	if err != nil {
		return err
	}
	e.team.auditLog, e.team.auditFrom, e.team.auditSent = id, from, -1
	return nil
}

// teamSendAudits sends snag.db's audit entries the store has not taken
// to its log, a thousand at a time, until none is left or the store
// cannot take them.
func (e *Engine) teamSendAudits(ctx context.Context) error {
	t := e.team
	t.auditMu.Lock()
	defer t.auditMu.Unlock()
	if t.auditSent < 0 {
		sent, err := t.s.AuditSent(ctx, t.auditLog)
		if err != nil {
			return err
		}
		t.auditSent = max(sent, t.auditFrom)
	}
	for {
		batch, err := e.p.DB.AuditLog(ctx, t.auditSent, 1000)
		if err != nil || len(batch) == 0 {
			return err
		}
		es := make([]coord.Entry, len(batch))
		for i, a := range batch {
			es[i] = coord.Entry{At: a.At, Session: a.SessionID, Actor: string(a.Actor), Agent: a.Agent, Action: a.Action,
				TaskID: a.TaskID, Outcome: a.Outcome, Detail: a.Detail, Branch: a.Branch, Log: t.auditLog, Local: a.ID}
		}
		if err := t.s.AuditBatch(ctx, es); err != nil {
			return err
		}
		t.auditSent = batch[len(batch)-1].ID
	}
}

// teamAudit reads the log of live actions with read, after this view's
// entries were sent to it, so that it has every one made so far. With
// the store out of reach (a team's, cut off) it is this view's own log,
// read with local, as it is for an engine without a store.
func (e *Engine) teamAudit(ctx context.Context, read func(context.Context) ([]coord.Entry, error),
	local func() ([]index.AuditEntry, error)) ([]index.AuditEntry, error) {
	if e.team == nil {
		return local()
	}
	err := e.teamSendAudits(ctx)
	var shared []coord.Entry
	if err == nil {
		shared, err = read(ctx)
	}
	if err != nil {
		e.log.Warn("the log of live actions is out of reach: this worktree's own entries are shown", "err", err)
		return local()
	}
	host, _ := os.Hostname()
	out := make([]index.AuditEntry, len(shared))
	for i, c := range shared {
		a := index.AuditEntry{ID: c.ID, SessionID: c.Session, At: c.At, Actor: queue.Actor(c.Actor), Agent: c.Agent,
			Action: c.Action, TaskID: c.TaskID, Outcome: c.Outcome, Detail: c.Detail, Branch: c.Branch}
		if c.Log != e.team.auditLog {
			if c.Root != e.root {
				a.Worktree = c.Root
			}
			if e.across() && c.Host != host {
				a.Host = c.Host
			}
		}
		out[i] = a
	}
	return out, nil
}

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
	if e.team != nil {
		e.team.queue(teamOp{post: &m})
	}
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

// teamEndFirst tells the store, before the commit that finishes task id
// here (resolved, or sent to a person's review), that its lease ends
// done: what the store has heard is what counts. The end is recorded at
// the lease's epoch, so no clone can be granted a task whose file here
// says it is finished, even when snagd dies right after the commit, and a
// lease the store ended or granted again meanwhile (this clone cut off
// past the grace) refuses the finish with ErrStale. With the store out of
// reach nothing is committed: the caller says to try again.
//
// It returns undo, to call when the commit then fails or does not finish
// the task: the store takes the end back (Unend), the lease held again at
// its epoch when it still is here, else free. A task no agent of this
// clone holds is a person's move, told after its commit (teamMoved).
func (e *Engine) teamEndFirst(ctx context.Context, id, why string) (undo func(), err error) {
	undo = func() {}
	if e.team == nil {
		return undo, nil
	}
	l, err := e.p.DB.LeaseOf(ctx, id)
	if err != nil || l.Detached || l.SessionID == 0 || l.Epoch == 0 {
		return undo, nil
	}
	t := e.team
	if err := e.teamReadyFor(ctx, claimConcern(l.SessionID, id)); err != nil {
		return undo, err
	}
	if err := t.s.End(ctx, id, l.Epoch, coord.Done, why); err != nil {
		return undo, e.teamErr(err)
	}
	t.mu.Lock()
	if t.endedFirst == nil {
		t.endedFirst = map[string]int64{}
	}
	t.endedFirst[id] = l.Epoch
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if t.endedFirst[id] == l.Epoch {
			delete(t.endedFirst, id)
		}
		t.mu.Unlock()
		ctx := context.WithoutCancel(ctx)
		now, err := e.p.DB.LeaseOf(ctx, id)
		hold := err == nil && now.Epoch == l.Epoch && now.SessionID == l.SessionID
		if err := t.s.Unend(ctx, id, l.Epoch, coordSession(index.Session{ID: l.SessionID, Name: l.Holder}), hold); err != nil {
			// Sent again from the outbox once the store answers (after a
			// rejoin, too): a finish the store heard and this clone never
			// committed must not leave the task done for every clone. The
			// start's reconcile takes back one still held here meanwhile.
			e.log.Warn("the coordination store was told a task was finished, and the finish was not committed here: the end is taken back once the store answers", "task", id, "err", err)
			t.queue(teamOp{unend: &index.Ended{Lease: index.Lease{TaskID: id, Epoch: l.Epoch}}, why: "the finish was not committed"})
		}
	}, nil
}

// finishRefused is the refusal of a finish the store did not record
// (teamEndFirst's err): a lease the store ended or granted again is ended
// here too, as teamFence does. e.mu must not be held.
func (e *Engine) finishRefused(ctx context.Context, it *index.Item, l index.Lease, err error) *Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finishRefusedLocked(ctx, it, l, err)
}

// finishRefusedLocked is finishRefused with e.mu held.
func (e *Engine) finishRefusedLocked(ctx context.Context, it *index.Item, l index.Lease, err error) *Error {
	if errors.Is(err, ErrStale) && e.p != nil {
		e.releaseLocked(ctx, it.ID, queue.System, l.Holder, "the shared lease ended: "+err.Error())
	}
	var r *Error
	if errors.As(err, &r) {
		return r
	}
	return refuse(ErrUnreachable, "coord_unreachable", "%s was not finished: %v", it.Key, err)
}

// teamEndFirstRetry is teamEndFirst for snagd's own finish (a verify's
// outcome), which no one waits to be answered: while the store is out of
// reach it tries again every beat, until the store hears it, refuses it,
// or snagd stops.
func (e *Engine) teamEndFirstRetry(ctx context.Context, id, why string) (undo func(), err error) {
	for {
		undo, err = e.teamEndFirst(ctx, id, why)
		if !errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrStarting) {
			return undo, err
		}
		select {
		case <-ctx.Done():
			return undo, err
		case <-time.After(e.team.beat):
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
		if op.unend != nil && errors.Is(err, coord.ErrCloneEnded) {
			return err // sent again once this clone has joined again
		}
		if err != nil && !errors.Is(err, coord.ErrStale) {
			// Refused for good (this clone was ended meanwhile, say): the
			// store's own sweep has freed what it held. Said, and audited:
			// never dropped without a word.
			e.log.Warn("the coordination store refused a change: it is not sent again", "change", op.String(), "err", err)
			e.Audit(ctx, index.AuditEntry{Actor: queue.System, Action: "coord", Outcome: "refused",
				Detail: op.String() + ": " + err.Error()})
		}
		t.mu.Lock()
		t.outbox = t.outbox[1:]
		t.mu.Unlock()
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
	e.Audit(ctx, index.AuditEntry{SessionID: s.ID, Actor: queue.System, Agent: name, Action: "rename", Outcome: "ok",
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
		if state == coord.Done && (errors.Is(err, coord.ErrStale) || errors.Is(err, coord.ErrCloneEnded)) {
			// Finished here, and the lease moved in the store meanwhile (the
			// clone was swept, and joined again): done all the same unless a
			// grant went past it.
			_, err = s.MarkDone(ctx, op.ended.TaskID, op.ended.Epoch, op.ended.Reason)
		}
		return err
	}
	return nil
}

// endState is the shared state a lease of task id ends in, by the task's
// status here: free when it is open (or held again), done when it is
// resolved, cancelled, back in the inbox or waiting for a person's
// review, which no clone's agent may take.
func (e *Engine) endState(ctx context.Context, id string) string {
	it, err := e.p.DB.Get(ctx, queue.Ref{ID: id})
	if err != nil {
		return coord.Free
	}
	switch it.Status {
	case queue.StatusOpen, queue.StatusClaimed, queue.StatusVerifying:
		return coord.Free
	}
	return coord.Done
}

// teamMoved tells the store of a person's move of a task: reopened, it
// may be claimed through any clone again; resolved, cancelled, rejected
// or sent to review, through none.
func (e *Engine) teamMoved(t *queue.Task, by string) {
	if e.team == nil || t == nil {
		return
	}
	state := coord.Done
	switch t.Status {
	case queue.StatusOpen:
		state = coord.Free
	case queue.StatusClaimed, queue.StatusVerifying:
		return
	}
	e.team.queue(teamOp{set: &teamSet{id: t.ID, key: t.Key, state: state}, why: "moved to " + string(t.Status) + " by " + by})
}

// teamClaimNext is claim-next in team mode: the store picks the first
// task of this clone's ready rows that no clone holds or resolved, and
// grants it; the claim by id then rewrites the file. A task that turns
// out not to be claimable here after all (blocked or changed since the
// rows were published) is given back and the next one tried.
func (e *Engine) teamClaimNext(ctx context.Context, s index.Session, force bool) (Claimed, error) {
	if e.Config().MaxPerSession() > 0 {
		held, err := e.p.DB.LeasesOf(ctx, s.ID)
		if err != nil {
			return Claimed{}, err
		}
		if refusal := e.atLimit(func(ref queue.Ref) (*index.Item, error) { return e.p.DB.Get(ctx, ref) }, held); refusal != nil {
			e.Audit(ctx, claimEntry(s, "", "refused", refusal.Message))
			return Claimed{}, refusal
		}
	}
	var tried []string
	republished := false
	// The tasks the session gave back are passed over while another is
	// ready: an agent that released one is not handed it again at once.
	gaveBack := e.gaveBackBy(s.ID)
	skipped := gaveBack
	for range 5 {
		if err := e.teamReadyFor(ctx, claimConcern(s.ID, "")); err != nil {
			return Claimed{}, err
		}
		pubs := e.team.pubs.Load()
		l, err := e.team.s.GrantNext(ctx, coordSession(s), slices.Concat(e.chosenIDs(), tried, skipped))
		if errors.Is(err, coord.ErrNoneReady) {
			row, rd, err := e.p.DB.Next(ctx)
			if err != nil {
				return Claimed{}, err
			}
			if row != nil && !republished {
				// A task ready here since the last publication (added,
				// released, reopened) is published now, and the grant
				// tried again; so it is when the publisher's loop
				// published it since the grant looked. An end of a lease
				// here that the store has not heard yet (a release just
				// made) is sent first: the store still holds that task.
				if e.team.waiting(func(op teamOp) bool { return op.ended != nil || op.set != nil }) {
					e.teamSend(ctx)
				}
				e.teamPublish(ctx)
				if e.team.pubs.Load() != pubs {
					republished = true
					continue
				}
			}
			if len(skipped) > 0 {
				// Nothing else is ready: a task it gave back may be
				// granted, and the answer says so.
				skipped = nil
				continue
			}
			reason := rd.String()
			if row != nil {
				reason = "nothing is ready: the tasks ready here are held or resolved through other clones"
			}
			return Claimed{Reason: reason}, nil
		}
		if err != nil {
			return Claimed{}, e.teamErr(err)
		}
		got, err := e.claim(ctx, s, &queue.Ref{ID: l.TaskID}, force, &l)
		if err == nil && got.Task != nil && slices.Contains(gaveBack, got.Task.ID) {
			got.Note = "you released " + got.Task.Key + " earlier in this session and nothing else is ready: work on it only if what stopped you has changed; else say so to the person"
		}
		var r *Error
		if err == nil || !errors.As(err, &r) || errors.Is(err, ErrHolding) || errors.Is(err, ErrUnreachable) || errors.Is(err, ErrSessionEnded) {
			return got, err
		}
		tried = append(tried, l.TaskID)
	}
	return Claimed{Reason: "nothing is ready: the tasks tried were not claimable here (blocked or changed since); try again"}, nil
}

// teamUngrant gives back a shared lease that the claim it was taken for
// did not use.
func (e *Engine) teamUngrant(ctx context.Context, l *coord.Lease, s index.Session, why string) {
	if err := e.team.s.Release(ctx, l.TaskID, l.Epoch, s.ID, why); err != nil && !errors.Is(err, coord.ErrStale) {
		e.team.queue(teamOp{ended: &index.Ended{Lease: index.Lease{TaskID: l.TaskID, Epoch: l.Epoch, SessionID: s.ID}, Reason: why}})
	}
}

// teamGrant takes the shared lease of task it for session s, after the
// changes of the outbox it depends on are sent (claimConcern).
func (e *Engine) teamGrant(ctx context.Context, it *index.Item, s index.Session) (coord.Lease, error) {
	if err := e.teamReadyFor(ctx, claimConcern(s.ID, it.ID)); err != nil {
		return coord.Lease{}, err
	}
	l, err := e.team.s.Grant(ctx, it.ID, it.Key, coordSession(s))
	return l, e.teamErr(err)
}

// teamReady refuses a grant while this clone is cut off or its leases
// are being reconciled with the store, and sends the outbox.
func (e *Engine) teamReady(ctx context.Context) error { return e.teamReadyFor(ctx, nil) }

// teamReadyFor is teamReady for a grant that depends only on the changes
// of the outbox that concern says it does: when none waits, the outbox
// is left to its sender and the grant goes ahead at once. A claim's grant
// depends on its session's changes and its task's, not on the ends of
// other tasks: one of those the store has not heard of yet is still held
// there, so no grant can take it, and a later end under an old epoch is
// refused as stale. (Sending every end first made each claim wait for the
// whole outbox, and claims queued behind one another.)
func (e *Engine) teamReadyFor(ctx context.Context, concern func(teamOp) bool) error {
	if e.team.gaveUp.Load() {
		return e.teamErr(coord.ErrUnreachable)
	}
	if !e.team.reconciled.Load() {
		// Until its leases agree with the store's, a grant could be taken
		// for one the reconcile is about to end. The first reconcile is
		// part of starting, and is waited out as the first rescan is; a
		// later one follows a rejoin, and is the store's news.
		if !e.team.started.Load() {
			return refuse(ErrStarting, "starting", "snagd is reconciling its leases with the coordination store: try again in a moment")
		}
		return refuse(ErrUnreachable, "coord_unreachable", "snagd is reconciling its leases with the coordination store (it joined again after being cut off): try again in a moment")
	}
	if concern != nil && !e.team.waiting(concern) {
		e.team.wake()
		return nil
	}
	if err := e.teamSend(ctx); err != nil {
		return e.teamErr(err)
	}
	return nil
}

// waiting reports whether a change concern says matters waits in the
// outbox.
func (t *team) waiting(concern func(teamOp) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.ContainsFunc(t.outbox, concern)
}

// claimConcern says which changes of the outbox a grant of task id (any
// task when id is "") to session sid must come after: the session's own
// (its registration, its end, a lease it adopted, its file claims) and
// the task's.
func claimConcern(sid int64, id string) func(teamOp) bool {
	return func(op teamOp) bool {
		switch {
		case op.register != nil:
			return op.register.ID == sid
		case op.endID != 0:
			return op.endID == sid
		case op.adopt != nil:
			return op.adopt.SessionID == sid || op.adopt.TaskID == id
		case op.files != nil:
			return op.files.session == sid
		case op.ended != nil:
			return id != "" && op.ended.TaskID == id
		case op.set != nil:
			return id != "" && op.set.id == id
		case op.unend != nil:
			return id != "" && op.unend.TaskID == id
		}
		return false
	}
}

// teamErr words an error of the store as the engine's refusals.
func (e *Engine) teamErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, coord.ErrHeld):
		return refuse(ErrHeld, "held", "%s; claim another task", strings.TrimPrefix(err.Error(), coord.ErrHeld.Error()+": "))
	case errors.Is(err, coord.ErrDone):
		return refuse(ErrTransition, "resolved_elsewhere", "%s", strings.TrimPrefix(err.Error(), coord.ErrDone.Error()+": "))
	case errors.Is(err, coord.ErrStale):
		return refuse(ErrStale, "stale", "%s: claim the task again before you write to it", err.Error())
	case errors.Is(err, coord.ErrUnreachable), errors.Is(err, coord.ErrCloneEnded):
		return refuse(ErrUnreachable, "coord_unreachable", "%s", e.cutOffMessage())
	}
	return err
}

// giveUpAfter is how long after its last heartbeat a clone cut off from
// the store gives its leases up: a heartbeat (at most a quarter of the
// grace) before the others may sweep it by its grace, so that it has
// stopped holding them before any other clone can be granted them. The
// last heartbeat counts from when it was sent (teamBeat), no later than
// the store's own mark of it.
func (t *team) giveUpAfter() time.Duration {
	grace := t.s.Grace()
	return grace - min(t.beat, grace/4)
}

// cutOff is how long the store has not taken a heartbeat, or 0 while it
// does.
func (t *team) cutOff() time.Duration {
	d := time.Since(time.Unix(0, t.lastBeat.Load()))
	if d < 2*t.beat+time.Second && !t.gaveUp.Load() {
		return 0
	}
	return d
}

func (e *Engine) cutOffMessage() string {
	d := e.team.cutOff()
	if e.team.gaveUp.Load() {
		return fmt.Sprintf("coordination unreachable for %d s: this clone's leases were given up at %s; nothing is granted until it is back (try again in a few seconds)",
			int(d.Seconds()), seconds(e.team.giveUpAfter()))
	}
	if d == 0 {
		return "coordination store unreachable: nothing is granted until it is back (try again in a few seconds)"
	}
	return fmt.Sprintf("coordination unreachable for %d s: nothing is granted until it is back (try again in a few seconds)", int(d.Seconds()))
}

// CoordNotice is what every answer to session id says while the store
// is out of reach: how long, and when the tasks it holds are given up
// ("coordination unreachable for 9 s: your lease of SNAG-3 will be given
// up at 15 s"); "" while all is well, or when snagd runs alone.
func (e *Engine) CoordNotice(ctx context.Context, id int64) string {
	if e.team == nil {
		return ""
	}
	d := e.team.cutOff()
	if d == 0 {
		return ""
	}
	at := seconds(e.team.giveUpAfter())
	if e.team.gaveUp.Load() {
		return fmt.Sprintf("coordination unreachable for %d s: every lease of this clone was given up at %s; claims wait until it is back", int(d.Seconds()), at)
	}
	var keys []string
	if ls, err := e.p.DB.LeasesOf(ctx, id); err == nil {
		for _, l := range ls {
			if it, err := e.p.DB.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
				keys = append(keys, it.Key)
			}
		}
	}
	if len(keys) == 0 {
		return fmt.Sprintf("coordination unreachable for %d s: nothing is granted until it is back", int(d.Seconds()))
	}
	return fmt.Sprintf("coordination unreachable for %d s: your lease of %s will be given up at %s", int(d.Seconds()), strings.Join(keys, ", "), at)
}

// seconds words d as "11 s", or "2.2 s" under ten seconds.
func seconds(d time.Duration) string {
	if d < 10*time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return strconv.Itoa(int(d.Seconds())) + " s"
}

// teamRun heartbeats, sweeps the clones gone silent, sends the outbox,
// publishes this clone's ready tasks and hears the other clones' events,
// until ctx ends.
func (e *Engine) teamRun(ctx context.Context) error {
	t := e.team
	// Every loop ends with ctx, and is waited for: none touches the
	// project once the engine closes.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { t.s.Listen(ctx, func(ev coord.Event) { e.teamHeard(ev) }) })
	e.teamRegisterLive(ctx)
	// The heartbeat has a loop of its own, and beats at once: the join's
	// own mark of life is already counting, and neither the start's
	// reconcile, nor a publication, nor a send that waits on a store out
	// of reach, may delay it past the grace (a restarted clone whose first
	// beat waited for its reconcile was swept by the others as silent).
	wg.Go(func() {
		beat := time.NewTicker(t.beat)
		defer beat.Stop()
		for {
			e.teamBeat(ctx)
			select {
			case <-ctx.Done():
				return
			case <-beat.C:
			}
		}
	})
	// The give-up has a loop of its own too: a heartbeat that waits on a
	// store out of reach (up to its timeout) must not delay it past the
	// moment the others may sweep this clone.
	wg.Go(func() {
		tick := time.NewTicker(min(t.beat/4, 250*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if d := time.Since(time.Unix(0, t.lastBeat.Load())); d >= t.giveUpAfter() && !t.gaveUp.Load() {
				e.teamGiveUp(ctx, fmt.Sprintf("coordination unreachable for %.1f s", d.Seconds()))
			}
		}
	})
	t.askReconcile()
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.recon:
				if !t.reconciled.Load() {
					e.teamReconcile(ctx)
				}
			}
		}
	})
	wg.Go(func() {
		retry := time.NewTicker(t.beat)
		defer retry.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.kick:
			case <-retry.C:
			}
			if e.teamSend(ctx) == nil {
				e.teamSendAudits(ctx)
			}
		}
	})
	pub := time.NewTicker(publishEvery)
	defer pub.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-pub.C:
			if t.cutOff() == 0 {
				e.teamPublish(ctx)
			}
		}
	}
}

// teamRegister registers new session s with the store at once, so that
// no agent of another clone is given its name meanwhile; a name taken
// there since is swapped for a free one. With the store out of reach the
// registration waits in the outbox.
func (e *Engine) teamRegister(ctx context.Context, s index.Session) index.Session {
	t := e.team
	for range 5 {
		if t.cutOff() > 0 {
			break
		}
		err := t.s.Register(ctx, coordSession(s))
		if err == nil {
			return s
		}
		if !errors.Is(err, coord.ErrNameTaken) {
			break
		}
		name, err := e.teamFreeName(ctx, s.Name)
		if err != nil {
			break
		}
		if err := e.p.DB.Rename(ctx, s.ID, name); err != nil {
			continue // taken here meanwhile: the next round picks another
		}
		e.live.ended(s.ID) // the kept copy has the old name
		s.Name = name
	}
	t.queue(teamOp{register: &s})
	return s
}

// teamFreeName is a name that no live session has: of the workspace (the
// store's), of this worktree (its registrations may still wait in the
// outbox) or of the repository's other worktrees; taken is the name that
// was refused.
func (e *Engine) teamFreeName(ctx context.Context, taken string) (string, error) {
	names, err := e.team.s.LiveNames(ctx)
	if err != nil {
		return "", err
	}
	names = append(names, taken)
	if local, err := e.p.DB.LiveSessions(ctx); err == nil {
		for _, s := range local {
			names = append(names, s.Name)
		}
	}
	if r := e.opts.Repository; r != nil {
		names = append(names, r.liveNames(ctx, e)...)
	}
	return freeName(names), nil
}

// freeName is the first of index.Names (then NAME-2, NAME-3 ...) not in
// taken.
func freeName(taken []string) string {
	for i := 1; ; i++ {
		for _, n := range index.Names {
			if i > 1 {
				n += "-" + strconv.Itoa(i)
			}
			if !slices.Contains(taken, n) {
				return n
			}
		}
	}
}

// teamRegisterLive registers every live session with the store (after a
// start, or a rejoin).
func (e *Engine) teamRegisterLive(ctx context.Context) {
	ss, err := e.p.DB.LiveSessions(ctx)
	if err != nil {
		return
	}
	for i := range ss {
		e.team.queue(teamOp{register: &ss[i]})
	}
}

// teamBeat heartbeats and sweeps. A clone the others ended gives its
// leases up and joins again; one cut off past the grace gives its leases
// up, since the others' sweep has freed them.
func (e *Engine) teamBeat(ctx context.Context) {
	t := e.team
	branch, _, _ := gitdir.Head(e.root)
	sent := time.Now() // before the store marks it: the give-up counts from here
	err := t.s.Heartbeat(ctx, branch)
	switch {
	case err == nil:
		if t.gaveUp.Swap(false) {
			e.log.Info("coordination store reachable again")
		}
		t.lastBeat.Store(sent.UnixNano())
		t.wake()
		if !t.reconciled.Load() {
			t.askReconcile()
		}
		if sw, err := t.s.Sweep(ctx); err != nil {
			e.log.Warn("sweep the clones gone silent: will try again at the next heartbeat", "err", err)
		} else {
			for _, c := range sw.Clones {
				e.log.Warn("a clone went silent past the grace: its sessions ended and its tasks were freed",
					"host", c.Host, "root", c.Root, "freed", len(sw.Leases))
			}
			for _, l := range sw.Leases {
				e.hub.Publish("lease", map[string]any{"task": l.Key, "ended": true, "reason": "holder's clone gone silent", "source": "team"})
			}
		}
	case errors.Is(err, coord.ErrCloneEnded):
		// The others ended this clone and freed its leases: it joins again
		// as a new clone, and takes back those no one took meanwhile.
		t.reconciled.Store(false)
		if err := t.s.Rejoin(ctx); err != nil {
			e.log.Warn("join the coordination store again", "err", err)
			return
		}
		e.log.Warn("the other clones had ended this one after it was silent past the grace: joined again as a new clone", "clone", t.s.Clone())
		t.gaveUp.Store(false)
		t.lastBeat.Store(time.Now().UnixNano())
		t.pubDirty.Store(true)
		// Its changes of the old clone's leases, claims and sessions are
		// moot: the sweep ended them. A person's move of a task, what was
		// posted for the team and the end of a lease whose task is finished
		// here still go (MarkDone), as its audit entries do.
		t.mu.Lock()
		queued := slices.Clone(t.outbox)
		t.mu.Unlock()
		finished := map[string]bool{}
		for _, op := range queued {
			if op.ended != nil {
				finished[op.ended.TaskID] = e.endState(ctx, op.ended.TaskID) == coord.Done
			}
		}
		t.mu.Lock()
		before := len(t.outbox)
		t.outbox = slices.DeleteFunc(t.outbox, func(op teamOp) bool {
			return op.post == nil && op.set == nil && (op.ended == nil || !finished[op.ended.TaskID])
		})
		dropped := before - len(t.outbox)
		t.mu.Unlock()
		if dropped > 0 {
			e.log.Warn("changes of the ended clone's sessions and leases were not sent: the sweep had ended them", "changes", dropped)
		}
		e.teamRegisterLive(ctx)
		t.askReconcile()
	default:
		d := time.Since(time.Unix(0, t.lastBeat.Load()))
		e.log.Warn("coordination store unreachable", "for", d.Round(time.Second), "err", err,
			"leases_given_up_at", t.giveUpAfter().Round(100*time.Millisecond))
	}
}

// teamReconcileSessions ends in the store this clone's sessions that
// snag.db no longer has live: they ended here while their end was waiting
// in the outbox when snagd stopped, and would otherwise stay live in the
// store for as long as this clone does, keeping their names from every
// other agent of the workspace. The store's list is read first: a
// session registered meanwhile is in snag.db before it is in the store,
// so it is never taken for an ended one. It returns the sessions live
// here, and whether the store answered.
func (e *Engine) teamReconcileSessions(ctx context.Context) (map[int64]bool, bool) {
	t := e.team
	shared, err := t.s.LiveSessions(ctx)
	if err != nil {
		e.log.Warn("reconcile the sessions with the coordination store: will try again", "err", err)
		return nil, false
	}
	local, err := e.p.DB.LiveSessions(ctx)
	if err != nil {
		e.log.Warn("reconcile the sessions with the coordination store: will try again", "err", err)
		return nil, false
	}
	live := make(map[int64]bool, len(local))
	for _, s := range local {
		live[s.ID] = true
	}
	for _, id := range shared {
		if live[id] {
			continue
		}
		const why = "reconcile: the session had ended here before snagd stopped, and the store had not heard"
		freed, err := t.s.EndSession(ctx, id, why)
		if err != nil {
			e.log.Warn("reconcile the sessions with the coordination store: will try again", "err", err)
			return nil, false
		}
		e.Audit(ctx, index.AuditEntry{SessionID: id, Actor: queue.System, Action: "reconcile", Outcome: "ok",
			Detail: fmt.Sprintf("%s (%d leases freed there)", why, len(freed))})
	}
	return live, true
}

// teamReconcile makes this clone's leases in snag.db and in the store
// agree, at the start and after a rejoin. A lease snag.db holds is kept
// when the store has it for this clone at the same epoch, and taken back
// at that epoch when the store has it free and no grant went past it
// (the agent's epoch stays good); otherwise another clone holds it or
// resolved it, and it is released here. A lease the store has for this
// clone that snag.db does not hold (snagd stopped between the grant and
// the file's rewrite) is ended in the store. The audit says which.
func (e *Engine) teamReconcile(ctx context.Context) {
	t := e.team
	clone := t.s.Clone()
	live, ok := e.teamReconcileSessions(ctx)
	if !ok {
		return
	}
	mine, err := t.s.Mine(ctx)
	if err != nil {
		e.log.Warn("reconcile the leases with the coordination store: will try again", "err", err)
		return
	}
	local, err := e.p.DB.Leases(ctx)
	if err != nil {
		e.log.Warn("reconcile the leases with the coordination store: will try again", "err", err)
		return
	}
	shared := make(map[string]coord.Lease, len(mine))
	for _, l := range mine {
		shared[l.TaskID] = l
	}
	var kept, taken, released, ended int
	for _, l := range local {
		if l.Detached || l.SessionID == 0 {
			// Derived from a file that says claimed (one git brought from
			// another clone, or one a rebuilt index read). When the store
			// granted it to a live session here of the name the file
			// says, that session claimed it and snagd stopped between the
			// file's rewrite and its own row: the lease is that session's
			// again. Otherwise no agent of this clone holds it, so it is
			// nothing to take or give back here.
			if m, ok := shared[l.TaskID]; ok && m.Session != 0 && live[m.Session] && m.Holder == l.Holder {
				var attached bool
				err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
					var err error
					attached, err = tx.Attach(l.TaskID, m.Session, m.Epoch)
					return err
				})
				if err != nil {
					e.log.Warn("reconcile the leases with the coordination store: will try again", "err", err)
					return
				}
				if attached {
					kept++
					e.Audit(ctx, index.AuditEntry{SessionID: m.Session, Actor: queue.System, Agent: m.Holder, Action: "reconcile", TaskID: l.TaskID,
						Outcome: "ok", Detail: fmt.Sprintf("the claim's file was rewritten before snagd stopped: the lease is %s's again, at epoch %d", m.Holder, m.Epoch)})
				}
			}
			delete(shared, l.TaskID)
			continue
		}
		if !live[l.SessionID] {
			// Its holder ended here, and snagd stopped before it had
			// released all its tasks: the task goes back to the queue, and
			// the store's lease, freed with the session above, stays so.
			delete(shared, l.TaskID)
			released++
			e.mu.Lock()
			if e.p != nil {
				if err := e.releaseLocked(ctx, l.TaskID, queue.System, l.Holder, "reconcile: holder gone before snagd stopped"); err != nil {
					e.log.Error("release a gone session's task", "task", l.TaskID, "err", err)
				}
			}
			e.mu.Unlock()
			continue
		}
		if m, ok := shared[l.TaskID]; ok && m.Epoch == l.Epoch {
			delete(shared, l.TaskID)
			kept++
			if m.Session != l.SessionID && l.SessionID != 0 {
				t.queue(teamOp{adopt: &l})
			}
			continue
		}
		key := l.TaskID
		if it, err := e.p.DB.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
			key = it.Key
		}
		_, err := t.s.GrantAt(ctx, l.TaskID, key, coord.Session{ID: l.SessionID, Name: l.Holder}, l.Epoch)
		switch {
		case err == nil:
			taken++
			e.Audit(ctx, index.AuditEntry{Actor: queue.System, Agent: l.Holder, Action: "reconcile", TaskID: l.TaskID, Outcome: "ok",
				Detail: fmt.Sprintf("the shared lease was free: taken back for %s at epoch %d", l.Holder, l.Epoch)})
		case errors.Is(err, coord.ErrUnreachable), errors.Is(err, coord.ErrCloneEnded):
			e.log.Warn("reconcile the leases with the coordination store: will try again", "err", err)
			return
		default:
			released++
			why := "reconcile: " + e.teamErr(err).Error()
			e.mu.Lock()
			if e.p != nil {
				if err := e.releaseLocked(ctx, l.TaskID, queue.System, l.Holder, why); err != nil {
					e.log.Error("release a lease another clone has", "task", l.TaskID, "err", err)
				}
			}
			e.mu.Unlock()
		}
	}
	for _, id := range e.chosenIDs() {
		delete(shared, id) // a claim under way: its grant is being mirrored now
	}
	for _, m := range shared {
		// The store has a grant that snag.db does not: snagd stopped
		// between the grant and the file's rewrite, or between the end of
		// its lease here and telling the store. The task's status here
		// says which way it ends: done when its work was resolved here.
		state := e.endState(ctx, m.TaskID)
		why := "reconcile: the grant's file was never rewritten here (snagd stopped between the two): the grant ended"
		if state == coord.Done {
			why = "reconcile: the lease ended here (the task is " + e.statusOf(ctx, m.TaskID) + ") before snagd stopped, and the store had not heard: it is done"
		}
		if err := t.s.End(ctx, m.TaskID, m.Epoch, state, why); err != nil && !errors.Is(err, coord.ErrStale) {
			e.log.Warn("reconcile the leases with the coordination store: will try again", "err", err)
			return
		}
		ended++
		e.Audit(ctx, index.AuditEntry{Actor: queue.System, Agent: m.Holder, Action: "reconcile", TaskID: m.TaskID, Outcome: "ok", Detail: why})
	}
	// A lease that ended here lately with its task finished may be one the
	// store never heard end (snagd stopped after the commit, before it
	// told the store), and that the others' sweep has freed since: it is
	// marked done there, unless a grant went past it.
	if recent, err := e.p.DB.EndedLeases(ctx, time.Now().Add(-recentEnds)); err == nil {
		for _, l := range recent {
			if e.endState(ctx, l.TaskID) != coord.Done {
				continue
			}
			why := "reconcile: the task was finished here (" + e.statusOf(ctx, l.TaskID) + ") before snagd stopped, and the store had not heard"
			changed, err := t.s.MarkDone(ctx, l.TaskID, l.Epoch, why)
			if err != nil {
				e.log.Warn("reconcile the leases with the coordination store: will try again", "err", err)
				return
			}
			if changed {
				ended++
				e.Audit(ctx, index.AuditEntry{Actor: queue.System, Agent: l.Holder, Action: "reconcile", TaskID: l.TaskID, Outcome: "ok", Detail: why})
			}
		}
	}
	if t.s.Clone() != clone {
		// Joined again as a new clone meanwhile: the new one is
		// reconciled anew.
		t.askReconcile()
		return
	}
	t.reconciled.Store(true)
	t.started.Store(true)
	if kept+taken+released+ended > 0 {
		e.log.Info("leases reconciled with the coordination store", "kept", kept, "taken_back", taken, "released", released, "grants_ended", ended)
	}
	if released > 0 {
		e.hub.Publish("lease", map[string]any{"reconciled": true, "released": released})
	}
}

// recentEnds is how far back a start's reconcile looks for leases that
// ended here with their task finished.
const recentEnds = 24 * time.Hour

// statusOf is task id's status here, or "gone".
func (e *Engine) statusOf(ctx context.Context, id string) string {
	if it, err := e.p.DB.Get(ctx, queue.Ref{ID: id}); err == nil {
		return string(it.Status)
	}
	return "gone"
}

// teamGiveUp gives back every task this clone's sessions hold, once:
// the other clones may hold them now.
func (e *Engine) teamGiveUp(ctx context.Context, why string) {
	if e.team.gaveUp.Swap(true) {
		return
	}
	e.team.pubDirty.Store(true)
	ls, err := e.p.DB.Leases(ctx)
	if err != nil {
		e.log.Error("list leases to give up", "err", err)
		return
	}
	ls = slices.DeleteFunc(ls, func(l index.Lease) bool { return l.Detached || l.SessionID == 0 })
	e.log.Warn("giving up every lease of this clone", "why", why, "leases", len(ls))
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil {
		return
	}
	for _, l := range ls {
		if err := e.releaseLocked(ctx, l.TaskID, queue.System, l.Holder, "lease given up: "+why); err != nil {
			e.log.Error("give up a lease", "task", l.TaskID, "err", err)
		}
	}
	e.hub.Publish("lease", map[string]any{"given_up": len(ls), "reason": why})
	e.writePlan(ctx)
}

// publishEvery is how often a clone publishes its ready tasks while
// snag.db changes. Each publication reads every ready row, and under many
// claims snag.db changes all the time: at 50 ms the three snagd of
// BenchmarkTeamClaims spent about a third of the claims' throughput on it.
// A claim-next that finds nothing while a task is ready here publishes
// at once (teamClaimNext), so a new task waits for no tick.
const publishEvery = 250 * time.Millisecond

// teamPublish writes this clone's ready tasks to the store when snag.db
// changed since the last time. One publication runs at a time: one that
// read the rows earlier never lands after one that read them later.
func (e *Engine) teamPublish(ctx context.Context) {
	t := e.team
	t.pubMu.Lock()
	defer t.pubMu.Unlock()
	w := e.p.DB.Writes()
	if !t.pubDirty.Load() && t.published.Load() == w || t.gaveUp.Load() || !e.ready.Load() {
		return
	}
	rows, err := e.p.DB.ReadyRows(ctx)
	if err != nil {
		return
	}
	ready := make([]coord.Ready, len(rows))
	for i, r := range rows {
		ready[i] = coord.Ready{TaskID: r.ID, Key: r.Key, Wave: r.Wave, SevRank: r.SevRank, Created: r.Created}
	}
	if err := t.s.Publish(ctx, ready); err != nil {
		t.pubDirty.Store(true)
		return
	}
	t.pubs.Add(1) // before the marks that tell a claim nothing is left to publish
	t.pubDirty.Store(false)
	t.published.Store(w)
}

// teamHeard passes another clone's event on to this snagd's subscribers,
// labelled as the team's.
func (e *Engine) teamHeard(ev coord.Event) {
	if ev.Clone == e.team.s.Clone() {
		return
	}
	data := map[string]any{}
	if ev.Kind == "resync" {
		e.team.pubDirty.Store(true)
		e.hub.Publish("team", map[string]any{"resync": true, "source": "team"})
		return
	}
	json.Unmarshal(ev.Data, &data)
	if ev.Kind == "files" && data["force"] == true {
		// A person on another clone freed a path from whoever held it:
		// this clone's own claims of it end too.
		if paths, ok := data["released"].([]any); ok {
			why, _ := data["reason"].(string)
			for _, p := range paths {
				if p, ok := p.(string); ok {
					e.p.DB.ForceReleaseFile(context.Background(), p, why+" (through "+ev.Host+")")
				}
			}
		}
	}
	data["source"], data["host"], data["branch"] = "team", ev.Host, ev.Branch
	e.hub.Publish(ev.Kind, data)
}

// teamFence checks, before an agent's resolve, that the store still has
// the session's lease of the task: one it ended (this clone was cut off,
// or a person took it back through another clone) is ended here too.
func (e *Engine) teamFence(ctx context.Context, ref queue.Ref, s index.Session) error {
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return nil // the resolve's own reads say so
	}
	l, err := e.p.DB.LeaseOf(ctx, it.ID)
	if err != nil || l.SessionID != s.ID {
		return nil // not held by s here: the resolve's own checks refuse it
	}
	if e.team.gaveUp.Load() {
		return e.teamErr(coord.ErrUnreachable)
	}
	if err := e.teamSend(ctx); err != nil {
		return e.teamErr(err)
	}
	_, err = e.team.s.Check(ctx, it.ID, l.Epoch, s.ID)
	if errors.Is(err, coord.ErrStale) {
		e.mu.Lock()
		if e.p != nil {
			e.releaseLocked(ctx, it.ID, queue.System, l.Holder, "the shared lease ended: "+err.Error())
		}
		e.mu.Unlock()
	}
	return e.teamErr(err)
}

// teamAlias is the next alias number of kind ("task" or "note") from the
// live state's sequence (the repository's, or a team's workspace's), never
// below floor: worktrees and clones adding at once on different branches
// never mint the same alias.
func (e *Engine) teamAlias(ctx context.Context, kind string, floor int) (int, error) {
	n, err := e.team.s.NextAlias(ctx, kind, int64(floor))
	if err != nil {
		return 0, e.teamErr(err)
	}
	return int(n), nil
}

// TeamItem is what another clone published that this clone's files do not
// have yet: a decision or an inbox item, by whom, on which branch.
type TeamItem struct {
	Kind, Key, Type, Title, Branch, From, Host string
	Created                                    time.Time
}

// teamContext adds to tc what the other clones have: their agents with
// what they hold and claim, their reports, the handoffs they left for s,
// and the notes and inbox items they added that this clone's files do not
// have yet. With the store out of reach, tc stays this clone's alone.
func (e *Engine) teamContext(ctx context.Context, tc *TeamContext, s index.Session) {
	t := e.team
	if t.cutOff() > 0 {
		return
	}
	agents, err := t.s.Agents(ctx)
	if err != nil {
		return
	}
	byName := map[string]int{}
	for _, a := range agents {
		v := AgentView{Session: index.Session{Name: a.Name + " on " + a.Host, Client: a.Client, Branch: a.Branch, Host: a.Host},
			Files: e.teamClaims(a.Files)}
		for _, l := range a.Leases {
			h := HeldTask{Key: l.Key, ID: l.TaskID, Status: queue.StatusClaimed, Epoch: l.Epoch}
			if it, err := e.p.DB.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
				h.Title, h.Trust = it.Title, it.Trust
			}
			v.Tasks = append(v.Tasks, h)
		}
		byName[a.Name+"@"+a.Host] = len(tc.Others)
		tc.Others = append(tc.Others, v)
	}
	asMessage := func(m coord.Message) index.Message {
		return index.Message{Created: m.Created, Kind: m.Kind, From: m.From + " on " + m.Host, To: m.To, Title: m.Title, Body: m.Body}
	}
	if reports, err := t.s.Messages(ctx, coord.Report, "", false, 20); err == nil {
		for _, m := range reports {
			if i, ok := byName[m.From+"@"+m.Host]; ok && tc.Others[i].LastReport == nil {
				r := asMessage(m)
				tc.Others[i].LastReport = &r
			}
			tc.Reports = append(tc.Reports, asMessage(m))
		}
		slices.SortStableFunc(tc.Reports, func(a, b index.Message) int { return b.Created.Compare(a.Created) })
		if len(tc.Reports) > contextReports {
			tc.Reports = tc.Reports[:contextReports]
		}
	}
	if hs, err := t.s.Messages(ctx, coord.Handoff, s.Name, true, contextHandoffsRead); err == nil && len(hs) > 0 {
		var ids []int64
		for i := len(hs) - 1; i >= 0; i-- { // oldest first, as the local ones
			if len(tc.Handoffs) == contextHandoffs { // the rest waits, unseen, for the next read
				tc.HandoffsMore += i + 1
				break
			}
			tc.Handoffs = append(tc.Handoffs, asMessage(hs[i]))
			ids = append(ids, hs[i].ID)
		}
		t.s.MarkSeen(ctx, ids)
	}
	for _, kind := range []string{coord.Note, coord.Inbox} {
		ms, err := t.s.Messages(ctx, kind, "", false, 20)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if len(tc.Team) == contextTeam {
				break
			}
			if kind == coord.Note && m.Type != "decision" {
				continue
			}
			if e.teamHas(ctx, kind, m.Key) {
				continue // merged: the files have it
			}
			tc.Team = append(tc.Team, TeamItem{Kind: kind, Key: m.Key, Type: m.Type, Title: m.Title, Branch: m.Branch,
				From: m.From, Host: m.Host, Created: m.Created})
		}
	}
}

// contextTeam is how many of the team's unmerged items a context lists.
const contextTeam = 3

// teamHas reports whether this clone's files have the note or task key.
func (e *Engine) teamHas(ctx context.Context, kind, key string) bool {
	if key == "" {
		return false
	}
	if kind == coord.Note {
		_, err := e.p.DB.Note(ctx, key)
		return err == nil
	}
	ref, err := queue.ParseRef(key)
	if err != nil {
		return false
	}
	_, err = e.p.DB.Get(ctx, ref)
	return err == nil
}

// teamHeldElsewhere is the team's leases that other clones hold, by task
// id (team mode, the store in reach): a task claimed on another clone is
// shown claimed there, not free. A store slow to answer leaves the rows as
// the files say, after heldReadTimeout.
func (e *Engine) teamHeldElsewhere(ctx context.Context) map[string]coord.Lease {
	if e.team == nil || !e.across() || e.team.cutOff() > 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, heldReadTimeout)
	defer cancel()
	ls, err := e.team.s.Leases(ctx)
	if err != nil {
		return nil
	}
	out := map[string]coord.Lease{}
	for _, l := range ls {
		if l.Clone != e.team.s.Clone() {
			out[l.TaskID] = l
		}
	}
	return out
}

// heldReadTimeout bounds the read of the other clones' leases that a list
// or a show makes.
const heldReadTimeout = 500 * time.Millisecond

// teamHostOf is the machine of the live agent name on another clone, or
// "" when none is (or snagd runs alone).
func (e *Engine) teamHostOf(ctx context.Context, name string) string {
	if !e.across() || e.team.cutOff() > 0 {
		return ""
	}
	agents, err := e.team.s.Agents(ctx)
	if err != nil {
		return ""
	}
	for _, a := range agents {
		if a.Name == name {
			return a.Host
		}
	}
	return ""
}
