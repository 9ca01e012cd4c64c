package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

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
// up at 15 s"); "" while all is well.
func (e *Engine) CoordNotice(ctx context.Context, id int64) string {
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
	wg.Go(func() { e.teamBeatLoop(ctx) })
	// The give-up has a loop of its own too: a heartbeat that waits on a
	// store out of reach (up to its timeout) must not delay it past the
	// moment the others may sweep this clone.
	wg.Go(func() { e.teamGiveUpLoop(ctx) })
	wg.Go(func() { e.teamSweepLoop(ctx) })
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

// teamBeatLoop heartbeats every beat, at once first, until ctx ends.
func (e *Engine) teamBeatLoop(ctx context.Context) {
	beat := time.NewTicker(e.team.beat)
	defer beat.Stop()
	for {
		e.teamBeat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
		}
	}
}

// teamGiveUpLoop gives this clone's leases up once it has been cut off
// from the store for giveUpAfter, until ctx ends.
func (e *Engine) teamGiveUpLoop(ctx context.Context) {
	t := e.team
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
}

// teamSweepLoop sweeps when a heartbeat asks it to, until ctx ends.
func (e *Engine) teamSweepLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.team.sweep:
			e.teamSweep(ctx)
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

// teamBeat heartbeats, and has the sweep loop sweep (teamSweep). A clone
// the others ended gives its leases up and joins again; one cut off past
// the grace gives its leases up, since the others' sweep has freed them.
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
		select {
		case t.sweep <- struct{}{}: // swept in a loop of its own (teamSweep)
		default:
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
		// Its changes of the old clone's sessions, claims and adoptions are
		// moot: the sweep ended them. A person's move of a task, what was
		// posted for the team, and every end of a lease still go, as its
		// audit entries do: the end of a lease whose task is finished here
		// marks it done (MarkDone), and one freed here, or a finish not
		// committed here, takes back a finish the store heard whose answer
		// was lost in the cut (Unend at that epoch). The sweep freed the
		// leases held, not those a lost finish had left done: dropped, such
		// an end left the task done for every clone with no file saying so.
		t.mu.Lock()
		before := len(t.outbox)
		t.outbox = slices.DeleteFunc(t.outbox, func(op teamOp) bool {
			return op.post == nil && op.set == nil && op.ended == nil && op.unend == nil
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

// teamSweep ends the clones gone silent past their grace, after a
// heartbeat the store took. It runs in a loop of its own: a sweep waits
// on the lock of a silent clone's row while that clone has a transaction
// open (one cut off in the middle of it holds the lock until the
// database ends the transaction, lock_timeout at each try), and waiting
// in the heartbeat's loop it kept this clone from heartbeating past its
// own grace: a clone never cut off gave its leases up, and was swept.
func (e *Engine) teamSweep(ctx context.Context) {
	sw, err := e.team.s.Sweep(ctx)
	if err != nil {
		e.log.Warn("sweep the clones gone silent: will try again at the next heartbeat", "err", err)
		return
	}
	for _, c := range sw.Clones {
		e.log.Warn("a clone went silent past the grace: its sessions ended and its tasks were freed",
			"host", c.Host, "root", c.Root, "freed", len(sw.Leases))
	}
	for _, l := range sw.Leases {
		e.hub.Publish(snag.LeaseEvent{Task: l.Key, Ended: true, Reason: "holder's clone gone silent", Source: "team"})
	}
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
	e.hub.Publish(snag.LeaseEvent{GivenUp: new(len(ls)), Reason: why})
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
		e.hub.Publish(snag.TeamEvent{Resync: true, Source: "team"})
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
	e.hub.Publish(snag.Relayed{Type: ev.Kind, Data: data})
}
