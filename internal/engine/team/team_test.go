package team

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snagdtest"
)

// sample is a copy of the sample project in a folder of the test's own.
func sample(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	snagdtest.CopySample(t, root)
	os.Remove(filepath.Join(root, project.Folder, project.PlanFile))
	return root
}

// joinLive opens an embedded live state in a folder of the test's own and
// joins it for root, as snagd joins the repository's; it is closed when
// the test ends.
func joinLive(t *testing.T, root string) coord.Live {
	t.Helper()
	live, err := coord.OpenEmbedded(context.Background(), filepath.Join(t.TempDir(), coord.EmbeddedFile),
		coord.Options{Host: "test", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Close)
	return live
}

// open opens an engine on root, a member of an embedded live state, and
// its team service; it reads every file and reconciles the leases, as
// the engine's first rescan and the service's first reconcile do. Their
// background loops are not run (a test drives what it needs). The engine
// is closed when the test ends.
func open(t *testing.T, root string) (*engine.Engine, *Service) {
	t.Helper()
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Options{Root: root, Home: t.TempDir(), Coord: joinLive(t, root)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	svc := New(e, nil)
	e.Rescan(ctx)
	svc.reconcile(ctx)
	if !e.Ready() {
		t.Fatal("the first rescan and reconcile did not make the engine ready")
	}
	return e, svc
}

// sessionClaiming registers a session named name, claims the next task
// for it, and returns both.
func sessionClaiming(t *testing.T, e *engine.Engine, name string) (index.Session, engine.Claimed) {
	t.Helper()
	ctx := context.Background()
	s, err := e.Register(ctx, index.Session{Name: name, Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Claim(ctx, s, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return s, got
}

// A resolve that comes while the start's reconcile has not yet taken its
// lease back (the store freed it with the clone that was killed, and the
// restarted one has not reconciled yet) is told to try again, and the
// lease is kept: the reconcile then takes it back at its epoch and the
// resolve goes through (TestTeamKilledCloneLeasesFreedAfterGrace failed on
// it under load: the resolve's check took the free lease for another
// clone's and released the task).
func TestAResolveBeforeTheReconcileKeepsTheLease(t *testing.T) {
	e, svc := open(t, sample(t))
	ctx := context.Background()
	s, got := sessionClaiming(t, e, "ADA")
	if got.Task == nil {
		t.Fatal("nothing to claim")
	}
	ref := queue.Ref{ID: got.Task.ID}
	// The store frees the lease as a sweep of a killed clone does; this
	// engine has not reconciled since.
	e.TeamUnreconciled()
	if err := e.Coord().End(ctx, got.Task.ID, got.Epoch, coord.Free, "its clone went silent"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resolve(ctx, engine.VerifyRequest{Ref: ref, Session: &s, Epoch: got.Epoch}); !errors.Is(err, engine.ErrStarting) && !errors.Is(err, engine.ErrUnreachable) {
		t.Fatalf("a resolve before the reconcile: %v; want to be told to try again", err)
	}
	if l, err := e.Project().DB.LeaseOf(ctx, got.Task.ID); err != nil || l.Epoch != got.Epoch || l.SessionID != s.ID {
		t.Fatalf("the lease after the early resolve: %+v %v; want it kept", l, err)
	}
	svc.reconcile(ctx)
	if _, err := e.Resolve(ctx, engine.VerifyRequest{Ref: ref, Session: &s, Epoch: got.Epoch}); err != nil {
		t.Fatalf("the resolve after the reconcile: %v", err)
	}
}

// A finish the store heard whose answer was lost in a cut is taken back
// even when the clone was swept before the cut healed: the end of the
// lease given up here still goes once the clone has joined again, so the
// task is not left done for every clone while no file says so (TESTPLAN
// T5 lost a task this way under load: the rejoin dropped the end from the
// outbox as moot, and the store kept the lost finish).
func TestALostFinishIsTakenBackAfterTheCloneWasSwept(t *testing.T) {
	ctx := context.Background()
	root := sample(t)
	path := filepath.Join(t.TempDir(), coord.EmbeddedFile)
	live, err := coord.OpenEmbedded(ctx, path, coord.Options{Host: "test", Root: root, Grace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Close)
	e, err := engine.Open(ctx, engine.Options{Root: root, Home: t.TempDir(), Coord: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	svc := New(e, nil)
	e.Rescan(ctx)
	svc.reconcile(ctx)
	_, got := sessionClaiming(t, e, "ADA")
	if got.Task == nil {
		t.Fatal("nothing to claim")
	}
	id := got.Task.ID
	// The store records the finish; its answer is lost in the cut.
	if err := e.Coord().End(ctx, id, got.Epoch, coord.Done, "resolved"); err != nil {
		t.Fatal(err)
	}
	// Cut off past the grace: the leases are given up here, and the other
	// clone sweeps this one.
	e.TeamGiveUp(ctx, "cut off")
	other, err := coord.OpenEmbedded(ctx, path, coord.Options{Host: "other", Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	for {
		sw, err := other.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(sw.Clones) == 1 {
			break // silent past its grace of a millisecond
		}
	}
	// Healed: the outbox meets the ended clone, the heartbeat joins again,
	// and the reconcile runs: once this clone is reconciled, the store has
	// heard the take-back (its agents' claims, and the others', go on
	// from there).
	if err := e.TeamSend(ctx); !errors.Is(err, coord.ErrCloneEnded) {
		t.Fatalf("the outbox's send to the ended clone: %v; want it kept until the clone joins again", err)
	}
	svc.beat(ctx)
	svc.reconcile(ctx)
	if !e.TeamLink().Reconciled {
		t.Fatal("the reconcile after the rejoin did not finish")
	}
	if l, err := e.Coord().LeaseOf(ctx, id); err != nil || l.State != coord.Free {
		t.Fatalf("the store's lease once the clone joined again and reconciled: %+v %v; want free", l, err)
	}
}

// stalledRegister is a live state whose next Register, once armed, waits
// until release is closed: a send of the outbox stalled on the store.
type stalledRegister struct {
	coord.Live
	entered, release chan struct{}
}

func (s *stalledRegister) Register(ctx context.Context, ses coord.Session) error {
	if s.entered != nil {
		close(s.entered)
		s.entered = nil
		<-s.release
	}
	return s.Live.Register(ctx, ses)
}

// A rejoin while the outbox is being sent (the clone was swept in a cut,
// and the heartbeat joins it again while the sender waits on the store)
// loses no change: the sender takes out of the outbox the change it sent,
// which the rejoin may have dropped, never the first one there, which is
// then another (here the end that takes back a lost finish).
func TestARejoinDuringASendLosesNoChange(t *testing.T) {
	ctx := context.Background()
	root := sample(t)
	path := filepath.Join(t.TempDir(), coord.EmbeddedFile)
	embedded, err := coord.OpenEmbedded(ctx, path, coord.Options{Host: "test", Root: root, Grace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(embedded.Close)
	live := &stalledRegister{Live: embedded}
	e, err := engine.Open(ctx, engine.Options{Root: root, Home: t.TempDir(), Coord: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	svc := New(e, nil)
	e.Rescan(ctx)
	svc.reconcile(ctx)
	_, got := sessionClaiming(t, e, "ADA")
	if got.Task == nil {
		t.Fatal("nothing to claim")
	}
	id := got.Task.ID
	if err := e.Coord().End(ctx, id, got.Epoch, coord.Done, "resolved"); err != nil {
		t.Fatal(err) // the finish whose answer the cut lost
	}
	e.TeamRegisterLive(ctx) // ADA's registration waiting in the outbox, first
	e.TeamGiveUp(ctx, "cut off")
	other, err := coord.OpenEmbedded(ctx, path, coord.Options{Host: "other", Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	for {
		sw, err := other.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(sw.Clones) == 1 {
			break
		}
	}
	live.entered, live.release = make(chan struct{}), make(chan struct{})
	entered := live.entered
	sent := make(chan error)
	go func() { sent <- e.TeamSend(ctx) }()
	<-entered
	svc.beat(ctx) // joins again, dropping the stalled registration
	close(live.release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	svc.reconcile(ctx)
	if l, err := e.Coord().LeaseOf(ctx, id); err != nil || l.State != coord.Free {
		t.Fatalf("the store's lease after the rejoin: %+v %v; want free", l, err)
	}
}

// stalledSweep is a live state whose sweeps wait until the test ends: a
// sweep waiting on the lock of a silent clone's row.
type stalledSweep struct {
	coord.Live
	done chan struct{}
}

func (s *stalledSweep) Sweep(ctx context.Context) (coord.Swept, error) {
	<-s.done
	return coord.Swept{}, nil
}

// A heartbeat never waits on a sweep: a sweep that waits on a lock (a
// cut-off clone's transaction left open) kept the clone that swept from
// heartbeating past its grace, and a clone never cut off gave its leases
// up (TESTPLAN T5, under load: the sweep timed out on the lock again and
// again). The sweep runs in a loop of its own.
func TestAHeartbeatDoesNotWaitOnASweep(t *testing.T) {
	ctx := context.Background()
	root := sample(t)
	live := &stalledSweep{Live: joinLive(t, root), done: make(chan struct{})}
	t.Cleanup(func() { close(live.done) })
	e, err := engine.Open(ctx, engine.Options{Root: root, Home: t.TempDir(), Coord: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	svc := New(e, nil)
	before := e.TeamLink().LastBeat
	svc.beat(ctx) // returns: the sweep it asks for waits in the sweep loop
	svc.beat(ctx)
	if e.TeamLink().LastBeat.Equal(before) {
		t.Error("the heartbeats were not taken")
	}
}
