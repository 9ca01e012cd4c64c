// Package team is the link of one worktree's engine to the repository's
// live state shared with the other clones (package coord): the loops that
// heartbeat, give this clone's leases up once it is cut off past the
// grace, sweep the clones gone silent, send the engine's outbox, publish
// the ready tasks, hear the other clones' events, and reconcile this
// clone's leases with the store at the start and after a rejoin.
//
// The engine keeps the moves and the state every grant reads (the
// outbox, when the store last took a heartbeat, whether this clone gave
// its leases up or is reconciled): the service reaches them over the
// small seam it declares, [Engine], and every change it makes to the
// index or the files is one of the engine's moves. The engine wakes the
// sender through a channel the service reads ([Engine.TeamWakes]).
//
// It must not import a transport (net/http, the daemon, mcp, client,
// board, cli) nor another service of the engine's.
package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Engine is the seam of the engine the team service works over;
// *engine.Engine satisfies it.
type Engine interface {
	// Coord is the live state the engine was opened with.
	Coord() coord.Live
	// Root is the project root.
	Root() string
	// Events is the hub that announces every change.
	Events() *engine.Hub
	// WaitReady returns once the first full rescan is done.
	WaitReady(ctx context.Context) error
	// Audit writes an entry to the audit log.
	Audit(ctx context.Context, a snag.AuditEntry)
	// Sessions are the live sessions here.
	Sessions(ctx context.Context) ([]index.Session, error)
	// Leases are the live leases here.
	Leases(ctx context.Context) ([]index.Lease, error)

	// TeamLink is the state of the link the engine keeps.
	TeamLink() engine.TeamLink
	// TeamWakes wakes the sender: a change was queued, or a heartbeat taken.
	TeamWakes() <-chan struct{}
	// TeamSend tells the store every change in the outbox, in order.
	TeamSend(ctx context.Context) error
	// TeamSendAudits sends the audit entries the store has not taken.
	TeamSendAudits(ctx context.Context) error
	// TeamPublish publishes this clone's ready tasks when snag.db changed.
	TeamPublish(ctx context.Context)
	// TeamUnpublished has the next publication publish whatever changed.
	TeamUnpublished()
	// TeamRegisterLive queues a registration of every live session.
	TeamRegisterLive(ctx context.Context)
	// TeamBeaten records a heartbeat the store took, sent at sent, and
	// reports whether this clone had given its leases up.
	TeamBeaten(sent time.Time) (back bool)
	// TeamUnreconciled marks this clone's leases as not reconciled.
	TeamUnreconciled()
	// TeamRejoined records a rejoin, and drops the outbox's moot changes.
	TeamRejoined() (dropped int)
	// TeamGiveUp gives back every task this clone's sessions hold, once.
	TeamGiveUp(ctx context.Context, why string)
	// TeamReleaseFile ends this clone's claims of path a person freed.
	TeamReleaseFile(ctx context.Context, path, why string)
	// TeamReconciled marks this clone's leases reconciled.
	TeamReconciled()
	// TeamClaiming lists the tasks claims under way have chosen.
	TeamClaiming() []string
	// TeamAttach gives a detached lease to the live session the store
	// granted it to.
	TeamAttach(ctx context.Context, taskID string, session, epoch int64) (bool, error)
	// TeamAdopt queues the adoption of lease l by its session.
	TeamAdopt(l index.Lease)
	// TeamRelease gives a lease's task back to the queue here.
	TeamRelease(ctx context.Context, l index.Lease, why string) error
	// TeamEndState is the shared state a lease of task id ends in.
	TeamEndState(ctx context.Context, id string) string
	// TeamTask is task id's key and status as snag.db has them.
	TeamTask(ctx context.Context, id string) (key string, status queue.Status, err error)
	// TeamEndedSince are the leases that ended here after since.
	TeamEndedSince(ctx context.Context, since time.Time) ([]index.Lease, error)
	// CoordRefusal words an error of the store as the engine's refusals.
	CoordRefusal(err error) error
}

// Service links one worktree's engine to the other clones. Its Run does
// the work; it holds no resource of its own.
type Service struct {
	e   Engine
	log *slog.Logger
	// sweep asks the sweep loop for a sweep of the clones gone silent,
	// after each heartbeat the store took.
	sweep chan struct{}
	// recon asks the reconcile loop for a reconcile (at the start, after
	// a rejoin, and after one that could not finish).
	recon chan struct{}
}

// New is the team service of engine e, logging to log (nil: discard).
func New(e Engine, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{e: e, log: log, sweep: make(chan struct{}, 1), recon: make(chan struct{}, 1)}
}

// publishEvery is how often a clone publishes its ready tasks while
// snag.db changes. Each publication reads every ready row, and under many
// claims snag.db changes all the time: at 50 ms the three snagd of
// BenchmarkTeamClaims spent about a third of the claims' throughput on it.
// A claim-next that finds nothing while a task is ready here publishes
// at once (the engine's teamClaimNext), so a new task waits for no tick.
const publishEvery = 250 * time.Millisecond

// Run heartbeats, sweeps the clones gone silent, sends the outbox,
// publishes this clone's ready tasks and hears the other clones' events,
// from the engine's first full rescan until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	if s.e.WaitReady(ctx) != nil {
		return nil
	}
	live := s.e.Coord()
	beat := s.e.TeamLink().Beat
	// Every loop ends with ctx, and is waited for: none touches the
	// project once the engine closes.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { live.Listen(ctx, s.heard) })
	s.e.TeamRegisterLive(ctx)
	// The heartbeat has a loop of its own, and beats at once: the join's
	// own mark of life is already counting, and neither the start's
	// reconcile, nor a publication, nor a send that waits on a store out
	// of reach, may delay it past the grace (a restarted clone whose first
	// beat waited for its reconcile was swept by the others as silent).
	wg.Go(func() { s.beatLoop(ctx, beat) })
	// The give-up has a loop of its own too: a heartbeat that waits on a
	// store out of reach (up to its timeout) must not delay it past the
	// moment the others may sweep this clone.
	wg.Go(func() { s.giveUpLoop(ctx, beat) })
	wg.Go(func() { s.sweepLoop(ctx) })
	s.askReconcile()
	wg.Go(func() { s.reconcileLoop(ctx) })
	wg.Go(func() { s.sendLoop(ctx, beat) })
	pub := time.NewTicker(publishEvery)
	defer pub.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-pub.C:
			if s.e.TeamLink().CutOff == 0 {
				s.e.TeamPublish(ctx)
			}
		}
	}
}

// askReconcile has the reconcile loop reconcile this clone's leases.
func (s *Service) askReconcile() {
	select {
	case s.recon <- struct{}{}:
	default:
	}
}

// reconcileLoop reconciles when asked to, while this clone is not
// reconciled, until ctx ends.
func (s *Service) reconcileLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.recon:
			if !s.e.TeamLink().Reconciled {
				s.reconcile(ctx)
			}
		}
	}
}

// sendLoop sends the outbox, then the audit entries, when the engine
// wakes it and every beat, until ctx ends.
func (s *Service) sendLoop(ctx context.Context, beat time.Duration) {
	retry := time.NewTicker(beat)
	defer retry.Stop()
	wakes := s.e.TeamWakes()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wakes:
		case <-retry.C:
		}
		if s.e.TeamSend(ctx) == nil {
			s.e.TeamSendAudits(ctx)
		}
	}
}

// beatLoop heartbeats every beat, at once first, until ctx ends.
func (s *Service) beatLoop(ctx context.Context, every time.Duration) {
	beat := time.NewTicker(every)
	defer beat.Stop()
	for {
		s.beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
		}
	}
}

// giveUpLoop gives this clone's leases up once it has been cut off from
// the store for the link's GiveUpAfter, until ctx ends.
func (s *Service) giveUpLoop(ctx context.Context, beat time.Duration) {
	tick := time.NewTicker(min(beat/4, 250*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l := s.e.TeamLink()
		if d := time.Since(l.LastBeat); d >= l.GiveUpAfter && !l.GaveUp {
			s.e.TeamGiveUp(ctx, fmt.Sprintf("coordination unreachable for %.1f s", d.Seconds()))
		}
	}
}

// sweepLoop sweeps when a heartbeat asks it to, until ctx ends.
func (s *Service) sweepLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.sweep:
			s.sweepSilent(ctx)
		}
	}
}

// beat heartbeats, and has the sweep loop sweep (sweepSilent). A clone
// the others ended gives its leases up and joins again; one cut off past
// the grace gives its leases up, since the others' sweep has freed them.
func (s *Service) beat(ctx context.Context) {
	live := s.e.Coord()
	branch, _, _ := gitdir.Head(s.e.Root())
	sent := time.Now() // before the store marks it: the give-up counts from here
	err := live.Heartbeat(ctx, branch)
	switch {
	case err == nil:
		if s.e.TeamBeaten(sent) { // and the sender is woken
			s.log.Info("coordination store reachable again")
		}
		if !s.e.TeamLink().Reconciled {
			s.askReconcile()
		}
		select {
		case s.sweep <- struct{}{}: // swept in a loop of its own (sweepSilent)
		default:
		}
	case errors.Is(err, coord.ErrCloneEnded):
		// The others ended this clone and freed its leases: it joins again
		// as a new clone, and takes back those no one took meanwhile.
		s.e.TeamUnreconciled()
		if err := live.Rejoin(ctx); err != nil {
			s.log.Warn("join the coordination store again", "err", err)
			return
		}
		s.log.Warn("the other clones had ended this one after it was silent past the grace: joined again as a new clone", "clone", live.Clone())
		// The outbox keeps what still goes (see engine.TeamRejoined).
		if dropped := s.e.TeamRejoined(); dropped > 0 {
			s.log.Warn("changes of the ended clone's sessions and leases were not sent: the sweep had ended them", "changes", dropped)
		}
		s.e.TeamRegisterLive(ctx)
		s.askReconcile()
	default:
		l := s.e.TeamLink()
		d := time.Since(l.LastBeat)
		s.log.Warn("coordination store unreachable", "for", d.Round(time.Second), "err", err,
			"leases_given_up_at", l.GiveUpAfter.Round(100*time.Millisecond))
	}
}

// sweepSilent ends the clones gone silent past their grace, after a
// heartbeat the store took. It runs in a loop of its own: a sweep waits
// on the lock of a silent clone's row while that clone has a transaction
// open (one cut off in the middle of it holds the lock until the
// database ends the transaction, lock_timeout at each try), and waiting
// in the heartbeat's loop it kept this clone from heartbeating past its
// own grace: a clone never cut off gave its leases up, and was swept.
func (s *Service) sweepSilent(ctx context.Context) {
	sw, err := s.e.Coord().Sweep(ctx)
	if err != nil {
		s.log.Warn("sweep the clones gone silent: will try again at the next heartbeat", "err", err)
		return
	}
	for _, c := range sw.Clones {
		s.log.Warn("a clone went silent past the grace: its sessions ended and its tasks were freed",
			"host", c.Host, "root", c.Root, "freed", len(sw.Leases))
	}
	for _, l := range sw.Leases {
		s.e.Events().Publish(snag.LeaseEvent{Task: l.Key, Ended: true, Reason: "holder's clone gone silent", Source: "team"})
	}
}

// heard passes another clone's event on to this snagd's subscribers,
// labelled as the team's.
func (s *Service) heard(ev coord.Event) {
	if ev.Clone == s.e.Coord().Clone() {
		return
	}
	data := map[string]any{}
	if ev.Kind == "resync" {
		s.e.TeamUnpublished()
		s.e.Events().Publish(snag.TeamEvent{Resync: true, Source: "team"})
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
					s.e.TeamReleaseFile(context.Background(), p, why+" (through "+ev.Host+")")
				}
			}
		}
	}
	data["source"], data["host"], data["branch"] = "team", ev.Host, ev.Branch
	s.e.Events().Publish(snag.Relayed{Type: ev.Kind, Data: data})
}
