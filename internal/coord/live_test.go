package coord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// The store contract suite (TESTPLAN R7, T1): every test here runs against
// both implementations of Live, the embedded one (a SQLite file, shared by
// the snagd of one repository on one machine) and the PostgreSQL one
// (shared by a team's clones), with the same expectations.

// opener opens member n of one shared live state, with grace (0: the
// default).
type opener func(t *testing.T, n int, grace time.Duration) Live

// eachStore runs f once per implementation, each on a fresh shared state.
func eachStore(t *testing.T, f func(t *testing.T, open opener)) {
	t.Run("embedded", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "snag", EmbeddedFile)
		// The members of one snagd (its worktrees' views) share the file's
		// connections, as they do in snagd; a member given a grace of its
		// own stands for a snagd process of its own, since silence and the
		// sweep are between processes (the members of one never sweep each
		// other).
		db, err := OpenEmbeddedDB(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		f(t, func(t *testing.T, n int, grace time.Duration) Live {
			t.Helper()
			opts := Options{Host: fmt.Sprintf("host%d", n), Root: fmt.Sprintf("/work/tree%d", n), Branch: "main", Grace: grace}
			if grace == 0 {
				s, err := db.Join(context.Background(), opts)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			s, err := OpenEmbedded(context.Background(), path, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			return s
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := newDB(t)
		f(t, func(t *testing.T, n int, grace time.Duration) Live {
			t.Helper()
			return openClone(t, dsn, "ws", n, grace)
		})
	})
}

// TestL1_OneWinner: sessions of three members grant one task at the same
// instant, round after round: exactly one wins each round, the others are
// told who holds it.
func TestL1_OneWinner(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		ms := []Live{open(t, 1, 0), open(t, 2, 0), open(t, 3, 0)}
		for i := range 12 {
			if err := ms[i%3].Register(ctx, Session{ID: int64(i + 1), Name: fmt.Sprintf("A%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		rounds := 100
		if testing.Short() {
			rounds = 30
		}
		for r := range rounds {
			id := fmt.Sprintf("T%04d", r)
			var wins atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 12 {
				m := ms[i%3]
				wg.Go(func() {
					<-start
					l, err := m.Grant(ctx, id, "SNAG-"+id, Session{ID: int64(i + 1), Name: fmt.Sprintf("A%d", i)})
					switch {
					case err == nil:
						if l.Epoch != 1 || l.State != Held {
							t.Errorf("round %d: granted %+v, want held at epoch 1", r, l)
						}
						wins.Add(1)
					case !errors.Is(err, ErrHeld):
						t.Errorf("round %d: %v", r, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if w := wins.Load(); w != 1 {
				t.Fatalf("round %d: %d winners, want exactly 1", r, w)
			}
		}
	})
}

// TestR7_EpochsFence: a lease released and granted again moves its epoch
// on; a write under the old epoch is refused as stale; a resolved task is
// granted to no one until a person reopens it (Set), which moves the
// epoch on too; a grant to the session that holds the task gives its
// lease as it is.
func TestR7_EpochsFence(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		a, b := open(t, 1, 0), open(t, 2, 0)
		sa, sb := Session{ID: 1, Name: "ADA"}, Session{ID: 2, Name: "BOB"}
		a.Register(ctx, sa)
		b.Register(ctx, sb)
		l1, err := a.Grant(ctx, "T1", "SNAG-1", sa)
		if err != nil || l1.Epoch != 1 {
			t.Fatalf("grant: %+v %v", l1, err)
		}
		if again, err := a.Grant(ctx, "T1", "SNAG-1", sa); err != nil || again.Epoch != 1 {
			t.Fatalf("the holder's grant again: %+v %v, want its lease at epoch 1", again, err)
		}
		if _, err := b.Grant(ctx, "T1", "SNAG-1", sb); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "ADA") || !strings.Contains(err.Error(), "host1") {
			t.Fatalf("another member's grant of a held task: %v, want ErrHeld naming ADA on host1", err)
		}
		if err := a.Release(ctx, "T1", l1.Epoch, sa.ID, "done for now"); err != nil {
			t.Fatal(err)
		}
		l2, err := b.Grant(ctx, "T1", "SNAG-1", sb)
		if err != nil || l2.Epoch != 2 {
			t.Fatalf("grant after the release: %+v %v, want epoch 2", l2, err)
		}
		if _, err := a.Check(ctx, "T1", l1.Epoch, sa.ID); !errors.Is(err, ErrStale) {
			t.Fatalf("check under the old epoch: %v, want ErrStale", err)
		}
		if err := a.Resolve(ctx, "T1", l1.Epoch, sa.ID, "late"); !errors.Is(err, ErrStale) {
			t.Fatalf("a resolve under the old epoch: %v, want ErrStale", err)
		}
		if _, err := b.Check(ctx, "T1", l2.Epoch, sb.ID); err != nil {
			t.Fatalf("the holder's check: %v", err)
		}
		if err := b.Resolve(ctx, "T1", l2.Epoch, sb.ID, "fixed"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Grant(ctx, "T1", "SNAG-1", sa); !errors.Is(err, ErrDone) {
			t.Fatalf("a grant of a resolved task: %v, want ErrDone", err)
		}
		if done, err := a.Finished(ctx); err != nil || !done["T1"] {
			t.Fatalf("finished: %v %v, want T1", done, err)
		}
		if err := a.Set(ctx, "T1", "SNAG-1", Free, "reopened by a person"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.GrantAt(ctx, "T1", "SNAG-1", sb, l2.Epoch); !errors.Is(err, ErrStale) {
			t.Fatalf("a take-back at the epoch from before a person's reopen: %v, want ErrStale", err)
		}
		if l, err := a.Grant(ctx, "T1", "SNAG-1", sa); err != nil || l.Epoch != 4 {
			t.Fatalf("a grant after a person reopened it: %+v %v, want epoch 4", l, err)
		}
		// A handoff moves the lease and its epoch to another session.
		sc := Session{ID: 3, Name: "CAL"}
		a.Register(ctx, sc)
		l, err := a.Transfer(ctx, "T1", 4, sc)
		if err != nil || l.Epoch != 5 || l.Holder != "CAL" {
			t.Fatalf("transfer: %+v %v, want CAL at epoch 5", l, err)
		}
		if _, err := a.Check(ctx, "T1", 4, sa.ID); !errors.Is(err, ErrStale) {
			t.Fatalf("the old holder's check after the handoff: %v, want ErrStale", err)
		}
	})
}

// TestR7_EndFirstAndUnend: a finish told to the store before its commit
// (End to Done) is taken back when the commit fails (Unend), held again or
// free, and a lease done at a member's own epoch is taken back at a
// restart (GrantAt); a person's decision in between wins.
func TestR7_EndFirstAndUnend(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		a, b := open(t, 1, 0), open(t, 2, 0)
		sa, sb := Session{ID: 1, Name: "ADA"}, Session{ID: 2, Name: "BOB"}
		a.Register(ctx, sa)
		b.Register(ctx, sb)
		l, _ := a.Grant(ctx, "T1", "SNAG-1", sa)
		if err := a.End(ctx, "T1", l.Epoch, Done, "resolved"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Grant(ctx, "T1", "SNAG-1", sb); !errors.Is(err, ErrDone) {
			t.Fatalf("a grant of a task finished first: %v, want ErrDone", err)
		}
		if err := a.Unend(ctx, "T1", l.Epoch, sa, true); err != nil {
			t.Fatal(err)
		}
		if got, err := a.Check(ctx, "T1", l.Epoch, sa.ID); err != nil || got.State != Held {
			t.Fatalf("after Unend: %+v %v, want held at epoch %d", got, err, l.Epoch)
		}
		a.End(ctx, "T1", l.Epoch, Done, "resolved")
		if got, err := a.GrantAt(ctx, "T1", "SNAG-1", sa, l.Epoch); err != nil || got.Epoch != l.Epoch || got.State != Held {
			t.Fatalf("take back a lease done at its own epoch: %+v %v", got, err)
		}
		a.End(ctx, "T1", l.Epoch, Done, "resolved")
		a.Unend(ctx, "T1", l.Epoch, sa, false)
		got, err := b.Grant(ctx, "T1", "SNAG-1", sb)
		if err != nil || got.Epoch != l.Epoch+1 {
			t.Fatalf("a grant after the end was taken back free: %+v %v", got, err)
		}
		b.End(ctx, "T1", got.Epoch, Done, "resolved")
		b.Set(ctx, "T1", "SNAG-1", Free, "reopened by a person")
		b.Unend(ctx, "T1", got.Epoch, sb, true)
		if now, err := b.LeaseOf(ctx, "T1"); err != nil || now.State != Free || now.Epoch != got.Epoch+1 {
			t.Fatalf("a late Unend after a person's reopen: %+v %v, want free at epoch %d", now, err, got.Epoch+1)
		}
		// MarkDone: a finish whose end the store never heard.
		l3, _ := a.Grant(ctx, "T3", "SNAG-3", sa)
		if changed, err := a.MarkDone(ctx, "T3", l3.Epoch, "resolved before a crash"); err != nil || !changed {
			t.Fatalf("mark done: %v %v", changed, err)
		}
		if changed, err := a.MarkDone(ctx, "T3", l3.Epoch, "again"); err != nil || changed {
			t.Fatalf("mark done again: %v %v, want no change", changed, err)
		}
	})
}

// TestR7_SilentMemberSwept: a member that stops heartbeating is ended by
// another after its grace: its sessions end and its leases are freed, no
// one else's; its own calls are then refused until it joins again, as a
// new member, and its old epochs are stale.
func TestR7_SilentMemberSwept(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		grace := 1200 * time.Millisecond
		a, b := open(t, 1, grace), open(t, 2, grace)
		sa, sb := Session{ID: 1, Name: "ADA"}, Session{ID: 7, Name: "BOB"}
		a.Register(ctx, sa)
		b.Register(ctx, sb)
		la, _ := a.Grant(ctx, "T1", "SNAG-1", sa)
		lb, _ := b.Grant(ctx, "T2", "SNAG-2", sb)
		ready := []Ready{{TaskID: "T3", Key: "SNAG-3", Wave: 1}}
		if err := a.Publish(ctx, ready); err != nil {
			t.Fatal(err)
		}
		if sw, err := b.Sweep(ctx); err != nil || len(sw.Clones) != 0 {
			t.Fatalf("a sweep while both beat: %+v %v", sw, err)
		}
		var swept Swept
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(swept.Clones) == 0; time.Sleep(100 * time.Millisecond) {
			if err := b.Heartbeat(ctx, "main"); err != nil {
				t.Fatal(err)
			}
			var err error
			if swept, err = b.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(swept.Clones) != 1 || swept.Clones[0].ID != a.Clone() || len(swept.Leases) != 1 || swept.Leases[0].TaskID != "T1" {
			t.Fatalf("swept %+v, want member %d and its lease of T1", swept, a.Clone())
		}
		if !strings.Contains(swept.Clones[0].Reason, "silent for more than 1.2s") {
			t.Errorf("the sweep's reason %q does not name the grace", swept.Clones[0].Reason)
		}
		if _, err := b.Check(ctx, "T2", lb.Epoch, sb.ID); err != nil {
			t.Fatalf("the live member's lease after the sweep: %v", err)
		}
		if err := a.Heartbeat(ctx, "main"); !errors.Is(err, ErrCloneEnded) {
			t.Fatalf("the ended member's heartbeat: %v, want ErrCloneEnded", err)
		}
		if err := a.Resolve(ctx, "T1", la.Epoch, sa.ID, "late"); !errors.Is(err, ErrCloneEnded) {
			t.Fatalf("the ended member's late resolve: %v, want ErrCloneEnded", err)
		}
		if _, err := b.Grant(ctx, "T1", "SNAG-1", sb); err != nil {
			t.Fatalf("another takes the freed task: %v", err)
		}
		old := a.Clone()
		if err := a.Rejoin(ctx); err != nil || a.Clone() == old {
			t.Fatalf("rejoin: %v, member %d (was %d)", err, a.Clone(), old)
		}
		if err := a.Resolve(ctx, "T1", la.Epoch, sa.ID, "late"); !errors.Is(err, ErrStale) {
			t.Fatalf("the rejoined member's stale resolve: %v, want ErrStale", err)
		}
		if names, err := b.LiveNames(ctx); err != nil || slices.Contains(names, "ADA") {
			t.Fatalf("live names after the sweep: %v %v; ADA's session ended with its member", names, err)
		}
		// The rejoined member is a new one: the same ready tasks published
		// again are its ready rows, granted from.
		sa2 := Session{ID: 2, Name: "ADA"}
		if err := a.Register(ctx, sa2); err != nil {
			t.Fatal(err)
		}
		if err := a.Publish(ctx, ready); err != nil {
			t.Fatal(err)
		}
		if l, err := a.GrantNext(ctx, sa2, nil); err != nil || l.TaskID != "T3" {
			t.Fatalf("grant next after the rejoin: %+v %v; want T3, published again", l, err)
		}
		log, err := b.AuditLog(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		saw := slices.ContainsFunc(log, func(e Entry) bool {
			return e.Action == "release" && e.TaskID == "T1" && strings.Contains(e.Detail, "clone gone")
		})
		if !saw {
			t.Fatalf("the audit has no release of T1 naming the sweep: %+v", log)
		}
	})
}

// TestR7_EachSweptByItsOwnGrace: a member whose grace is long is not
// swept by one whose grace is short while it is within its own, and the
// short one learns at its join that they differ.
func TestR7_EachSweptByItsOwnGrace(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		long := open(t, 1, 30*time.Second)
		short := open(t, 2, 300*time.Millisecond)
		if gs := short.OtherGraces(); len(gs) != 1 || gs[0] != 30*time.Second {
			t.Fatalf("the other graces seen at the join: %v, want [30s]", gs)
		}
		quick := open(t, 3, 300*time.Millisecond)
		ses := Session{ID: 1, Name: "ADA"}
		long.Register(ctx, ses)
		long.Grant(ctx, "T1", "SNAG-1", ses)
		sw := sweepUntil(t, short)
		if len(sw.Clones) != 1 || sw.Clones[0].ID != quick.Clone() {
			t.Fatalf("swept %+v, want only member %d (silent past its 300 ms), not member %d (within its 30 s)", sw.Clones, quick.Clone(), long.Clone())
		}
		if _, err := long.Check(ctx, "T1", 1, ses.ID); err != nil {
			t.Fatalf("the long-grace member's lease: %v", err)
		}
	})
}

// TestR7_Names: one live session per name across members; a name is free
// again once its session ends.
func TestR7_Names(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		a, b := open(t, 1, 0), open(t, 2, 0)
		if err := a.Register(ctx, Session{ID: 1, Name: "ADA"}); err != nil {
			t.Fatal(err)
		}
		if err := b.Register(ctx, Session{ID: 1, Name: "ADA"}); !errors.Is(err, ErrNameTaken) || !strings.Contains(err.Error(), "host1") {
			t.Fatalf("a second live ADA: %v, want ErrNameTaken naming host1", err)
		}
		if names, _ := b.LiveNames(ctx); !slices.Equal(names, []string{"ADA"}) {
			t.Fatalf("the names b sees live elsewhere: %v, want [ADA]", names)
		}
		if ids, _ := a.LiveSessions(ctx); !slices.Equal(ids, []int64{1}) {
			t.Fatalf("a's live sessions: %v, want [1]", ids)
		}
		if _, err := a.EndSession(ctx, 1, "bridge closed"); err != nil {
			t.Fatal(err)
		}
		if err := b.Register(ctx, Session{ID: 1, Name: "ADA"}); err != nil {
			t.Fatalf("ADA after the first ended: %v", err)
		}
		// Names at once from every member: one winner per name.
		var wins atomic.Int32
		var wg sync.WaitGroup
		ms := []Live{a, b, open(t, 3, 0)}
		for i := range 9 {
			wg.Go(func() {
				if err := ms[i%3].Register(ctx, Session{ID: int64(100 + i), Name: "ZED"}); err == nil {
					wins.Add(1)
				} else if !errors.Is(err, ErrNameTaken) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d sessions registered as ZED at once, want 1", wins.Load())
		}
	})
}

// TestR7_Sequences: members take alias numbers at once: every number once,
// none below the floor each asked for.
func TestR7_Sequences(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		ms := []Live{open(t, 1, 0), open(t, 2, 0), open(t, 3, 0)}
		var mu sync.Mutex
		seen := map[int64]bool{}
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				for range 60 {
					n, err := ms[i].NextAlias(ctx, "task", 10)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if seen[n] || n < 10 {
						t.Errorf("alias %d twice, or below the floor of 10", n)
					}
					seen[n] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for i := int64(10); i < 10+180; i++ {
			if !seen[i] {
				t.Fatalf("alias %d was never handed out: want 10..189, each once", i)
			}
		}
		if n, err := ms[0].NextAlias(ctx, "task", 1000); err != nil || n != 1000 {
			t.Fatalf("a floor above the sequence: %d %v, want 1000", n, err)
		}
		if n, err := ms[1].NextAlias(ctx, "note", 0); err != nil || n != 0 && n != 1 {
			t.Fatalf("the note sequence is its own: %d %v", n, err)
		}
		// A number given back is taken again, when it was the last taken;
		// one with others taken after it stays a gap.
		n, _ := ms[0].NextAlias(ctx, "task", 0)
		if err := ms[1].GiveBack(ctx, "task", n); err != nil {
			t.Fatal(err)
		}
		if again, err := ms[2].NextAlias(ctx, "task", 0); err != nil || again != n {
			t.Fatalf("after giving %d back the next is %d %v, want %d", n, again, err, n)
		}
		next, _ := ms[0].NextAlias(ctx, "task", 0)
		ms[0].GiveBack(ctx, "task", n) // not the last taken: a gap
		if after, _ := ms[0].NextAlias(ctx, "task", 0); after != next+1 {
			t.Fatalf("giving back %d after %d was taken made the next %d, want %d", n, next, after, next+1)
		}
	})
}

// TestR7_FileClaims: exclusive claims that overlap are refused across
// members, all or nothing, naming the holder; shared claims coexist; a
// release, a person's force release and the expiry end them.
func TestR7_FileClaims(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		a, b := open(t, 1, 0), open(t, 2, 0)
		sa, sb := Session{ID: 1, Name: "ADA"}, Session{ID: 2, Name: "BOB"}
		a.Register(ctx, sa)
		b.Register(ctx, sb)
		prefix := func(x, y string) bool { return strings.HasPrefix(x, y) || strings.HasPrefix(y, x) }
		r, err := a.ClaimFiles(ctx, FilesRequest{Session: sa, Paths: []string{"src/api/"}, TTL: time.Minute, Exclusive: true}, prefix)
		if err != nil || len(r.Claimed) != 1 {
			t.Fatalf("a's claim: %+v %v", r, err)
		}
		r, err = b.ClaimFiles(ctx, FilesRequest{Session: sb, Paths: []string{"docs/x.md", "src/api/h.go"}, TTL: time.Minute, Exclusive: true}, prefix)
		if err != nil || len(r.Claimed) != 0 || len(r.Conflicts) != 1 || r.Conflicts[0].Holder != "ADA" {
			t.Fatalf("b's overlapping claim: %+v %v, want none made and ADA's in the way", r, err)
		}
		if all, _ := b.FileClaims(ctx); len(all) != 1 {
			t.Fatalf("claims after the refusal: %+v, want a's alone (all or nothing)", all)
		}
		if r, err := b.ClaimFiles(ctx, FilesRequest{Session: sb, Paths: []string{"docs/"}, TTL: time.Minute}, prefix); err != nil || len(r.Claimed) != 1 {
			t.Fatalf("b's shared claim of another path: %+v %v", r, err)
		}
		if r, err := a.ClaimFiles(ctx, FilesRequest{Session: sa, Paths: []string{"docs/y.md"}, TTL: time.Minute}, prefix); err != nil || len(r.Claimed) != 1 {
			t.Fatalf("a's shared claim beside b's: %+v %v", r, err)
		}
		if r, err := a.ClaimFiles(ctx, FilesRequest{Session: sa, Paths: []string{"src/api/"}, TTL: time.Minute, Exclusive: true}, prefix); err != nil || r.Renewed != 1 {
			t.Fatalf("a's claim again: %+v %v, want it renewed", r, err)
		}
		if err := a.ReleaseFiles(ctx, sa.ID, []string{"src/api/"}, "done"); err != nil {
			t.Fatal(err)
		}
		if r, err := b.ClaimFiles(ctx, FilesRequest{Session: sb, Paths: []string{"src/api/h.go"}, TTL: 300 * time.Millisecond, Exclusive: true}, prefix); err != nil || len(r.Claimed) != 1 {
			t.Fatalf("b's claim after a released: %+v %v", r, err)
		}
		r = FilesResult{}
		for deadline := time.Now().Add(10 * time.Second); len(r.Claimed) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if r, err = a.ClaimFiles(ctx, FilesRequest{Session: sa, Paths: []string{"src/"}, TTL: time.Minute, Exclusive: true}, prefix); err != nil {
				t.Fatal(err)
			}
		}
		if len(r.Claimed) != 1 {
			t.Fatalf("a's claim once b's 300 ms claim expired: %+v, want it made", r)
		}
		ended, err := b.ForceReleaseFile(ctx, "src/", "a person took it back")
		if err != nil || len(ended) != 1 || ended[0].Holder != "ADA" {
			t.Fatalf("force release: %+v %v", ended, err)
		}
		// A branch's write lease: one session at a time, renewable.
		if _, ok, err := a.TakeBranch(ctx, "main", sa, time.Minute); err != nil || !ok {
			t.Fatalf("take main: %v %v", ok, err)
		}
		if held, ok, err := b.TakeBranch(ctx, "main", sb, time.Minute); err != nil || ok || held.Holder != "ADA" {
			t.Fatalf("b takes main while a holds it: %+v %v %v", held, ok, err)
		}
		if _, ok, err := a.TakeBranch(ctx, "main", sa, time.Minute); err != nil || !ok {
			t.Fatalf("a renews main: %v %v", ok, err)
		}
	})
}

// TestR7_Audit: entries come back in order, after an id, with their
// member.
func TestR7_Audit(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		a, b := open(t, 1, 0), open(t, 2, 0)
		if err := a.Audit(ctx, Entry{Actor: "agent", Agent: "ADA", Action: "claim", TaskID: "T1", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
		if err := b.AuditBatch(ctx, []Entry{{Actor: "agent", Agent: "BOB", Action: "claim", TaskID: "T2", Outcome: "ok"},
			{Actor: "agent", Agent: "BOB", Action: "resolve", TaskID: "T2", Outcome: "ok"}}); err != nil {
			t.Fatal(err)
		}
		log, err := a.AuditLog(ctx, 0, 10)
		if err != nil || len(log) != 3 {
			t.Fatalf("audit log: %+v %v", log, err)
		}
		if log[0].Agent != "ADA" || log[0].Clone != a.Clone() || log[0].Host != "host1" || log[2].Action != "resolve" || log[2].Clone != b.Clone() {
			t.Fatalf("audit log out of order or without its member: %+v", log)
		}
		if after, _ := a.AuditLog(ctx, log[0].ID, 10); len(after) != 2 {
			t.Fatalf("the log after the first entry: %+v", after)
		}
		if !strings.HasSuffix(log[0].Root, "1") || !strings.HasSuffix(log[2].Root, "2") || log[0].Root == "" {
			t.Errorf("the entries' folders: %q %q, want each member's", log[0].Root, log[2].Root)
		}
		// An entry keeps the time it was made at, and its id in the
		// member's own log; what a member sent last is known after it
		// joins again, and is its own.
		at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		if err := a.AuditBatch(ctx, []Entry{{At: at, Actor: "person", Action: "edit", Outcome: "ok", Log: "L1", Local: 41},
			{At: at, Actor: "person", Action: "edit", Outcome: "ok", Log: "L1", Local: 42}}); err != nil {
			t.Fatal(err)
		}
		tail, err := b.AuditTail(ctx, 2)
		if err != nil || len(tail) != 2 || tail[0].Local != 41 || tail[1].Local != 42 || !tail[1].At.Equal(at) {
			t.Fatalf("the audit's tail: %+v %v; want the entries 41 and 42, oldest first, at %v", tail, err, at)
		}
		if err := a.Rejoin(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := a.AuditSent(ctx, "L1"); err != nil || n != 42 {
			t.Errorf("the last entry of the log sent: %d %v, want 42", n, err)
		}
		if n, err := b.AuditSent(ctx, "L2"); err != nil || n != 0 {
			t.Errorf("the last entry of a log never sent: %d %v, want 0", n, err)
		}
		if tail[1].Log != "L1" {
			t.Errorf("the entry's log: %q, want L1", tail[1].Log)
		}
	})
}

// TestL2_DrainExactlyOnce: three members publish the same ready
// tasks and sessions on each take the next one until none is left: every
// task is granted once, in the queue's order for each member, and done.
func TestL2_DrainExactlyOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		ms := []Live{open(t, 1, 0), open(t, 2, 0), open(t, 3, 0)}
		n := 600
		if testing.Short() {
			n = 150
		}
		var ready []Ready
		for i := range n {
			ready = append(ready, Ready{TaskID: fmt.Sprintf("T%05d", i), Key: fmt.Sprintf("SNAG-%d", i+1), Wave: int64(i % 3), Created: int64(i)})
		}
		for _, m := range ms {
			if err := m.Publish(ctx, ready); err != nil {
				t.Fatal(err)
			}
		}
		first, err := ms[0].GrantNext(ctx, Session{ID: 99, Name: "FIRST"}, nil)
		if err != nil || first.TaskID != "T00000" || first.Epoch != 1 {
			t.Fatalf("the first grant: %+v %v, want T00000 (wave 0, made first) at epoch 1", first, err)
		}
		if l, err := ms[1].GrantNext(ctx, Session{ID: 98, Name: "SKIP"}, []string{"T00003"}); err != nil || l.TaskID != "T00006" {
			t.Fatalf("a grant passing T00003 over: %+v %v, want T00006", l, err)
		}
		var mu sync.Mutex
		got := map[string]int{"T00000": 1, "T00006": 1}
		var wg sync.WaitGroup
		for i := range 24 {
			m := ms[i%3]
			ses := Session{ID: int64(i + 1), Name: fmt.Sprintf("A%d", i)}
			if err := m.Register(ctx, ses); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for {
					l, err := m.GrantNext(ctx, ses, nil)
					if errors.Is(err, ErrNoneReady) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					got[l.TaskID]++
					mu.Unlock()
					if err := m.Resolve(ctx, l.TaskID, l.Epoch, ses.ID, "done"); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if len(got) != n {
			t.Fatalf("%d tasks granted, want %d", len(got), n)
		}
		for id, k := range got {
			if k != 1 {
				t.Fatalf("%s granted %d times", id, k)
			}
		}
		if done, err := ms[2].Finished(ctx); err != nil || len(done) != n-2 {
			t.Fatalf("finished: %d %v, want %d", len(done), err, n-2)
		}
		// A publication without a task takes it out of claim-next.
		ms[0].Set(ctx, "T00000", "SNAG-1", Free, "reopened by a person")
		ms[0].Publish(ctx, nil)
		if _, err := ms[0].GrantNext(ctx, Session{ID: 99, Name: "FIRST"}, nil); !errors.Is(err, ErrNoneReady) {
			t.Fatalf("claim-next with nothing published: %v, want ErrNoneReady", err)
		}
		if l, err := ms[1].GrantNext(ctx, Session{ID: 98, Name: "SKIP"}, nil); err != nil || l.TaskID != "T00000" {
			t.Fatalf("claim-next on a member that has it ready: %+v %v, want the reopened T00000", l, err)
		}
	})
}

// TestR7_MessagesAndAgents: what one member posts the others read (not
// their own), a handoff to one agent alone, marked seen once read; the
// other members' agents with what they hold, their activity by branch,
// and the members themselves.
func TestR7_MessagesAndAgents(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		a, b := open(t, 1, 0), open(t, 2, 0)
		sa := Session{ID: 1, Name: "ADA", Client: "claude-code"}
		a.Register(ctx, sa)
		l, _ := a.Grant(ctx, "T1", "SNAG-1", sa)
		a.ClaimFiles(ctx, FilesRequest{Session: sa, Paths: []string{"src/"}, TTL: time.Minute, Exclusive: true}, func(x, y string) bool { return x == y })
		a.Heartbeat(ctx, "feature")
		a.Post(ctx, Message{Kind: Handoff, From: "ADA", To: "BOB", Key: "SNAG-1", Title: "take it", Body: strings.Repeat("é", 3000)})
		a.Post(ctx, Message{Kind: Note, From: "ADA", Key: "N-4", Title: "chose X"})
		a.Audit(ctx, Entry{Actor: "agent", Agent: "ADA", Action: "claim", TaskID: "T1", Outcome: "ok", Branch: "feature"})
		if own, _ := a.Messages(ctx, Handoff, "", false, 10); len(own) != 0 {
			t.Fatalf("a member reads its own messages: %+v", own)
		}
		hs, err := b.Messages(ctx, Handoff, "BOB", true, 10)
		if err != nil || len(hs) != 1 || hs[0].From != "ADA" || hs[0].Branch != "feature" || hs[0].Host != "host1" {
			t.Fatalf("BOB's handoffs: %+v %v", hs, err)
		}
		if len(hs[0].Body) > maxBody+40 || !strings.HasSuffix(hs[0].Body, "[cut: the file has the rest]") {
			t.Fatalf("a long body is not cut: %d bytes", len(hs[0].Body))
		}
		if others, _ := b.Messages(ctx, Handoff, "CAL", true, 10); len(others) != 0 {
			t.Fatalf("CAL reads BOB's handoff: %+v", others)
		}
		b.MarkSeen(ctx, []int64{hs[0].ID})
		if again, _ := b.Messages(ctx, Handoff, "BOB", true, 10); len(again) != 0 {
			t.Fatalf("a seen handoff is unseen still: %+v", again)
		}
		agents, err := b.Agents(ctx)
		if err != nil || len(agents) != 1 || agents[0].Name != "ADA" || len(agents[0].Leases) != 1 || agents[0].Leases[0].Epoch != l.Epoch ||
			len(agents[0].Files) != 1 || agents[0].Branch != "feature" {
			t.Fatalf("the other members' agents: %+v %v", agents, err)
		}
		act, err := b.Activity(ctx, time.Now().Add(-time.Hour))
		if err != nil || act["feature"] == nil || !slices.Equal(act["feature"].Claimed, []string{"SNAG-1"}) || !slices.Equal(act["feature"].Nodes, []string{"N-4"}) {
			t.Fatalf("the activity of feature: %+v %v", act["feature"], err)
		}
		cs, err := b.Clones(ctx)
		if err != nil || len(cs) != 2 || cs[0].Held != 1 || !slices.Equal(cs[0].Sessions, []string{"ADA"}) || cs[0].Branch != "feature" {
			t.Fatalf("the members: %+v %v", cs, err)
		}
		// An agent's resolve hands the task to verify: it is not resolved
		// in the activity until the task is done.
		a.Audit(ctx, Entry{Actor: "agent", Agent: "ADA", Action: "resolve", TaskID: "T1", Outcome: "ok", Branch: "feature"})
		if act, _ := b.Activity(ctx, time.Now().Add(-time.Hour)); len(act["feature"].Resolved) != 0 {
			t.Fatalf("a task still verifying is resolved in the activity: %+v", act["feature"])
		}
		if err := a.Resolve(ctx, "T1", l.Epoch, sa.ID, "verified"); err != nil {
			t.Fatal(err)
		}
		if act, _ := b.Activity(ctx, time.Now().Add(-time.Hour)); !slices.Equal(act["feature"].Resolved, []string{"SNAG-1"}) {
			t.Fatalf("a done task is not resolved in the activity: %+v", act["feature"])
		}
	})
}

// TestEmbeddedMembersOfOneProcess: the members one process joined through
// one file (a snagd's worktree views) are never swept by each other,
// however long they were silent together (a machine that slept); a
// member another process left behind is.
func TestEmbeddedMembersOfOneProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), EmbeddedFile)
	db, err := OpenEmbeddedDB(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	grace := 300 * time.Millisecond
	a, err := db.Join(ctx, Options{Host: "h", Root: "/a", Grace: grace})
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.Join(ctx, Options{Host: "h", Root: "/b", Grace: grace})
	if err != nil {
		t.Fatal(err)
	}
	other, err := OpenEmbedded(ctx, path, Options{Host: "h", Root: "/c", Grace: grace})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sw := sweepUntil(t, a)
	if len(sw.Clones) != 1 || sw.Clones[0].ID != other.Clone() {
		t.Fatalf("swept %+v, want the other process's member %d alone, not this process's %d", sw.Clones, other.Clone(), b.Clone())
	}
	if err := b.Heartbeat(ctx, "main"); err != nil {
		t.Fatalf("this process's other member after the sweep: %v", err)
	}
}

// sweepUntil heartbeats m and sweeps until a sweep ends a member (10 s at
// most), and returns that sweep.
func sweepUntil(t *testing.T, m Live) Swept {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := m.Heartbeat(ctx, "main"); err != nil {
			t.Fatal(err)
		}
		sw, err := m.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(sw.Clones) > 0 {
			return sw
		}
	}
	t.Fatal("no member was swept within 10 s")
	return Swept{}
}

// TestEmbeddedGoesOnFromTheKeysFile: the key sequences an earlier snagd
// kept in the state folder's keys file are where live.db's go on from,
// however often it is opened, and the file is left as it was; a damaged
// line counts for nothing. The sequence needs no member (snag doctor
// --fix takes keys from it without a snagd).
func TestEmbeddedGoesOnFromTheKeysFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	legacy := "note 7\ntask 41\ntask x\nbogus\n"
	if err := os.WriteFile(filepath.Join(dir, legacyKeysFile), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, EmbeddedFile)
	for i, want := range []int64{42, 43} {
		db, err := OpenEmbeddedDB(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := db.NextAlias(ctx, "task", 1); err != nil || n != want {
			t.Errorf("open %d: the next task key %d %v, want %d", i+1, n, err, want)
		}
		db.Close()
	}
	s, err := OpenEmbedded(ctx, path, Options{Host: "h", Root: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.NextAlias(ctx, "note", 0); err != nil || n != 8 {
		t.Errorf("the next note key %d %v, want 8", n, err)
	}
	if n, err := s.NextAlias(ctx, "task", 100); err != nil || n != 100 {
		t.Errorf("a floor above the sequence: %d %v, want 100", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, legacyKeysFile)); string(b) != legacy {
		t.Errorf("the keys file was changed: %q", b)
	}
}

// TestEmbeddedMigratesAnOlderFile: a live.db an earlier snag made, its
// audit without the local column, is brought up to date when it is
// opened, its entries kept.
func TestEmbeddedMigratesAnOlderFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), EmbeddedFile)
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	if err != nil {
		t.Fatal(err)
	}
	err = sqlitex.ExecuteScript(conn, `CREATE TABLE audit (id INTEGER PRIMARY KEY, clone INTEGER, at INTEGER NOT NULL,
		session INTEGER NOT NULL DEFAULT 0, actor TEXT NOT NULL, agent TEXT NOT NULL DEFAULT '', action TEXT NOT NULL,
		task_id TEXT NOT NULL DEFAULT '', outcome TEXT NOT NULL DEFAULT '', detail TEXT NOT NULL DEFAULT '',
		branch TEXT NOT NULL DEFAULT '');
		INSERT INTO audit (clone, at, actor, action) VALUES (1, 1, 'person', 'edit');`, nil)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // and again, once it is up to date
		s, err := OpenEmbedded(ctx, path, Options{Host: "h", Root: "/r"})
		if err != nil {
			t.Fatalf("open a live.db of an earlier snag: %v", err)
		}
		if err := s.Audit(ctx, Entry{Actor: "agent", Action: "claim", Log: "L", Local: 7}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.AuditSent(ctx, "L"); err != nil || n != 7 {
			t.Errorf("AuditSent after the migration: %d %v, want 7", n, err)
		}
		s.Close()
	}
	s, err := OpenEmbedded(ctx, path, Options{Host: "h", Root: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	log, err := s.AuditLog(ctx, 0, 10)
	if err != nil || len(log) != 3 || log[0].Action != "edit" || log[0].Local != 0 {
		t.Fatalf("the log after the migration: %+v %v; want the earlier entry kept, and two claims", log, err)
	}
}
