package coord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// newDB returns the DSN of a new database with the snag schema.
func newDB(t *testing.T) string {
	t.Helper()
	dsn := pgtest.NewDB(t)
	if _, err := Init(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// openClone opens the store as clone n of workspace ws.
func openClone(t *testing.T, dsn, ws string, n int, grace time.Duration) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{Workspace: ws, Host: fmt.Sprintf("host%d", n),
		Root: fmt.Sprintf("/work/clone%d", n), Branch: "main", Grace: grace, MaxConns: 12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestInitOnceAndRefusedBefore(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	_, err := Open(ctx, dsn, Options{Workspace: "w", Host: "h", Root: "/r"})
	if !errors.Is(err, ErrNotInitialised) || !strings.Contains(err.Error(), "snag team init") {
		t.Fatalf("open before init: %v, want ErrNotInitialised naming snag team init", err)
	}
	var wg sync.WaitGroup
	applied := make([][]int, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() { applied[i], errs[i] = Init(ctx, dsn) })
	}
	wg.Wait()
	total := 0
	for i := range 4 {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		total += len(applied[i])
	}
	if total != latestVersion() {
		t.Fatalf("4 concurrent inits applied %d migrations in all, want %d (each once)", total, latestVersion())
	}
	if again, err := Init(ctx, dsn); err != nil || len(again) != 0 {
		t.Fatalf("init again: %v %v, want nothing applied", again, err)
	}
}

// TestWorkspacesApart: two workspaces in one database never see each
// other's leases, ready tasks or aliases.
func TestWorkspacesApart(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	a, b := openClone(t, dsn, "github.com/acme/one", 1, 0), openClone(t, dsn, "github.com/acme/two", 2, 0)
	s := Session{ID: 1, Name: "ADA"}
	a.Register(ctx, s)
	b.Register(ctx, s)
	if _, err := a.Grant(ctx, "T1", "SNAG-1", s); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Grant(ctx, "T1", "SNAG-1", s); err != nil {
		t.Fatalf("the same id in another workspace: %v", err)
	}
	a.Publish(ctx, []Ready{{TaskID: "T2", Key: "SNAG-2"}})
	if _, err := b.GrantNext(ctx, s, nil); !errors.Is(err, ErrNoneReady) {
		t.Fatalf("the other workspace's ready task: %v, want ErrNoneReady", err)
	}
	if ls, _ := b.Leases(ctx); len(ls) != 1 {
		t.Fatalf("leases of two: %+v", ls)
	}
	na, _ := a.NextAlias(ctx, "task", 1)
	nb, _ := b.NextAlias(ctx, "task", 1)
	if na != 1 || nb != 1 {
		t.Fatalf("aliases %d %d: each workspace starts at 1", na, nb)
	}
	if cs, _ := a.Clones(ctx); len(cs) != 1 {
		t.Fatalf("clones seen from one: %+v", cs)
	}
}

// TestEventsReachOtherClones: a grant on one clone is heard on another
// within a second.
func TestEventsReachOtherClones(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := openClone(t, dsn, "ws", 1, 0), openClone(t, dsn, "ws", 2, 0)
	got := make(chan Event, 16)
	go b.Listen(ctx, func(e Event) {
		if e.Kind == "lease" {
			got <- e
		}
	})
	s := Session{ID: 1, Name: "ADA"}
	a.Register(ctx, s)
	// b listens once it has heard a grant: grant W0, W1, ... until it hears
	// one (the events of those it heard late are passed over below).
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatal("b heard none of 50 grants, 200 ms apart: its listener never came up")
		}
		id := fmt.Sprintf("W%d", i)
		if _, err := a.Grant(ctx, id, id, s); err != nil {
			t.Fatal(err)
		}
		heard := false
		select {
		case <-got:
			heard = true
		case <-time.After(200 * time.Millisecond):
		}
		if heard {
			break
		}
	}
	var lat []time.Duration
	for i := range 20 {
		start := time.Now()
		id := fmt.Sprintf("T%d", i)
		if _, err := a.Grant(ctx, id, id, s); err != nil {
			t.Fatal(err)
		}
		for heard := false; !heard; {
			select {
			case e := <-got:
				if e.Clone == a.Clone() && strings.Contains(string(e.Data), `"W`) {
					continue // a grant of the warm-up, heard late
				}
				if e.Clone != a.Clone() || !strings.Contains(string(e.Data), id) {
					t.Fatalf("event %+v, want clone %d's grant of %s", e, a.Clone(), id)
				}
				lat = append(lat, e.At.Sub(start))
				heard = true
			case <-time.After(5 * time.Second):
				t.Fatalf("no event for the grant of %s within 5 s", id)
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("clone-to-clone event latency over %d grants: p50 %v, max %v", len(lat), lat[len(lat)/2], lat[len(lat)-1])
}

// TestUnreachableIsRetryable: with the server stopped, calls fail as
// ErrUnreachable and hold no password; once it is back they succeed.
func TestUnreachableIsRetryable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgtest.Start(ctx)
	if err != nil {
		pgtest.Shared(t) // skips or fails as the shared cluster would
		t.Fatal(err)
	}
	defer c.Close()
	db, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dsn := c.DSN(db)
	if _, err := Init(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	s := openClone(t, dsn, "ws", 1, 0)
	ses := Session{ID: 1, Name: "ADA"}
	s.Register(ctx, ses)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = s.Grant(ctx, "T1", "SNAG-1", ses)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("grant with the server down: %v, want ErrUnreachable", err)
	}
	if strings.Contains(err.Error(), c.Password) {
		t.Fatalf("the error holds the password: %v", err)
	}
	if err := s.Heartbeat(ctx, "main"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("heartbeat with the server down: %v", err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var l Lease
	for range 50 {
		if l, err = s.Grant(ctx, "T1", "SNAG-1", ses); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || l.Epoch != 1 {
		t.Fatalf("grant after the restart: %+v %v", l, err)
	}
}

// TestHeartbeatIsNotQueuedBehindGrants: a grant in flight holds its
// clone's row against a sweep, but not against the clone's own heartbeat,
// which lands at once; a sweep of that clone, silent by then, waits for
// the grant and frees what it granted. (With the grant's lock FOR SHARE,
// the heartbeat waited behind every grant, and under many claims a live
// clone missed the grace and was swept.)
func TestHeartbeatIsNotQueuedBehindGrants(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	grace := time.Second
	a, b := openClone(t, dsn, "ws", 1, grace), openClone(t, dsn, "ws", 2, grace)
	sa := Session{ID: 1, Name: "ADA"}
	if err := a.Register(ctx, sa); err != nil {
		t.Fatal(err)
	}

	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := a.live(ctx, tx); err != nil {
		t.Fatal(err)
	}
	beat, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := a.Heartbeat(beat, "main"); err != nil {
		t.Fatalf("heartbeat while a grant of the same clone is in flight: %v; want it to land at once", err)
	}

	// The clone falls silent with its grant still in flight: b's sweep
	// ends it only after the grant commits, and frees the lease it made.
	time.Sleep(grace + 200*time.Millisecond) // silent past its grace: time itself
	if _, err := a.grant(ctx, tx, "T1", "SNAG-1", sa); err != nil {
		t.Fatal(err)
	}
	swept := make(chan Swept, 1)
	go func() {
		sw, err := b.Sweep(ctx)
		if err != nil {
			t.Error(err)
		}
		swept <- sw
	}()
	// The sweep has come as far as the grant's lock once a backend of this
	// database waits on a lock; until the grant commits it goes no further.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting int
		if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case sw := <-swept:
			t.Fatalf("the sweep ended clone %d while its grant was in flight: %+v", a.Clone(), sw)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no sweep waits behind the grant in flight after 10 s")
		}
	}
	select {
	case sw := <-swept:
		t.Fatalf("the sweep ended clone %d while its grant was in flight: %+v", a.Clone(), sw)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	sw := <-swept
	if len(sw.Clones) != 1 || len(sw.Leases) != 1 || sw.Leases[0].TaskID != "T1" {
		t.Fatalf("swept %+v; want clone %d and the lease of T1 its grant committed", sw, a.Clone())
	}
	if l, err := b.LeaseOf(ctx, "T1"); err != nil || l.State != Free {
		t.Fatalf("T1 after the sweep: %+v %v; want free", l, err)
	}
}

// TestGrantNextOrder: claim-next takes the free tasks in the queue's order
// (wave, then severity, then creation), only among those the clone
// published as ready, passing by tasks done or held; a task released comes
// back at its place, and a publication that moves a task in the order
// moves its lease row too.
func TestGrantNextOrder(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	one, two := openClone(t, dsn, "ws", 1, 0), openClone(t, dsn, "ws", 2, 0)
	tasks := map[string]Ready{
		"A": {TaskID: "A", Key: "SNAG-1", Wave: 2, SevRank: 0, Created: 1},
		"B": {TaskID: "B", Key: "SNAG-2", Wave: 1, SevRank: 2, Created: 2},
		"C": {TaskID: "C", Key: "SNAG-3", Wave: 1, SevRank: 1, Created: 3},
		"D": {TaskID: "D", Key: "SNAG-4", Wave: 0, SevRank: 0, Created: 4}, // ready on clone 2 only
		"E": {TaskID: "E", Key: "SNAG-5", Wave: 1, SevRank: 1, Created: 5},
	}
	pick := func(ids ...string) []Ready {
		var rs []Ready
		for _, id := range ids {
			rs = append(rs, tasks[id])
		}
		return rs
	}
	if err := one.Publish(ctx, pick("A", "B", "C", "E")); err != nil {
		t.Fatal(err)
	}
	if err := two.Publish(ctx, pick("D")); err != nil {
		t.Fatal(err)
	}
	ses := Session{ID: 1, Name: "VESPER"}
	if err := one.Register(ctx, ses); err != nil {
		t.Fatal(err)
	}
	grant := func(want string) Lease {
		t.Helper()
		l, err := one.GrantNext(ctx, ses, nil)
		if want == "" {
			if !errors.Is(err, ErrNoneReady) {
				t.Fatalf("granted %s (%v), want nothing ready", l.TaskID, err)
			}
			return l
		}
		if err != nil || l.TaskID != want {
			t.Fatalf("granted %q (%v), want %s", l.TaskID, err, want)
		}
		return l
	}
	c := grant("C") // wave 1 before 2; severity 1 before 2; D is not ready here
	e := grant("E") // C is held: passed by
	if err := one.Release(ctx, c.TaskID, c.Epoch, ses.ID, "back"); err != nil {
		t.Fatal(err)
	}
	c = grant("C") // released: back at its place, before B
	if err := one.Resolve(ctx, c.TaskID, c.Epoch, ses.ID, "done"); err != nil {
		t.Fatal(err)
	}
	if err := one.Resolve(ctx, e.TaskID, e.Epoch, ses.ID, "done"); err != nil {
		t.Fatal(err)
	}
	a := tasks["A"]
	a.Wave = 0 // a person moved A to the front
	tasks["A"] = a
	if err := one.Publish(ctx, pick("A", "B", "C", "E")); err != nil {
		t.Fatal(err)
	}
	grant("A")
	grant("B")
	grant("") // C and E done, D never ready here
}

// TestCloneIdentity: two containers with the same host name and folder
// are two clones: the second does not take over the first's row and
// leases. The same clone restarting (its identity kept in the repository's
// state folder) takes its row back, as does the first clone of a host and
// folder after an upgrade from a version that kept no identity.
func TestCloneIdentity(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	stateA, stateB := t.TempDir(), t.TempDir()
	idA, idB := CloneIdentity(stateA), CloneIdentity(stateB)
	if idA == "" || idA == idB || CloneIdentity(stateA) != idA {
		t.Fatalf("identities %q and %q (again %q): want two, each kept", idA, idB, CloneIdentity(stateA))
	}
	open := func(id string) *Store {
		t.Helper()
		s, err := Open(ctx, dsn, Options{Workspace: "w", Host: "container", Root: "/src/shop", Identity: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a := open(idA)
	if _, err := a.Grant(ctx, "T1", "SNAG-1", Session{ID: 1, Name: "ADA"}); err != nil {
		t.Fatal(err)
	}
	b := open(idB)
	if a.Clone() == b.Clone() {
		t.Fatalf("a second container with the same host and folder took over clone %d", a.Clone())
	}
	if l, err := b.LeaseOf(ctx, "T1"); err != nil || l.Clone != a.Clone() {
		t.Errorf("T1's lease after the second container joined: %+v, %v; want still the first's", l, err)
	}
	if again := open(idA); again.Clone() != a.Clone() {
		t.Errorf("the first container, started again, is clone %d; want its own %d back", again.Clone(), a.Clone())
	}
	old, err := Open(ctx, dsn, Options{Workspace: "w", Host: "laptop", Root: "/src/shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if upgraded := func() *Store {
		s, err := Open(ctx, dsn, Options{Workspace: "w", Host: "laptop", Root: "/src/shop", Identity: CloneIdentity(t.TempDir())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}(); upgraded.Clone() != old.Clone() {
		t.Errorf("a clone upgraded from a version with no identity is clone %d; want its row %d back", upgraded.Clone(), old.Clone())
	}
}
