package coord

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// prefixOverlap is the overlap of plain paths and folder globs ("web/**")
// that the tests use; snagd passes repopath.Overlap.
func prefixOverlap(a, b string) bool {
	trim := func(p string) string { return strings.TrimSuffix(p, "**") }
	a, b = trim(a), trim(b)
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

// TestL7_FileClaimsAllOrNothingAcrossClones: sessions on three clones
// race for overlapping exclusive claims, round after round: exactly one
// gets its paths each round, and a refused claim made none of its paths.
func TestL7_FileClaimsAllOrNothingAcrossClones(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	clones := []*Store{openClone(t, dsn, "ws", 1, 0), openClone(t, dsn, "ws", 2, 0), openClone(t, dsn, "ws", 3, 0)}
	for r := range 40 {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 9 {
			c := clones[i%3]
			wg.Go(func() {
				paths := []string{fmt.Sprintf("r%d/own-%d.go", r, i), fmt.Sprintf("r%d/shared.go", r)}
				res, err := c.ClaimFiles(ctx, FilesRequest{Session: Session{ID: int64(i + 1), Name: fmt.Sprintf("A%d", i)},
					Paths: paths, TTL: time.Minute, Exclusive: true}, prefixOverlap)
				if err != nil {
					t.Error(err)
					return
				}
				if len(res.Conflicts) == 0 {
					wins.Add(1)
				} else if len(res.Claimed) != 0 {
					t.Errorf("a refused claim made %d claims", len(res.Claimed))
				}
			})
		}
		wg.Wait()
		if w := wins.Load(); w != 1 {
			t.Fatalf("round %d: %d claims of r%d/shared.go won, want exactly 1", r, w, r)
		}
	}
	all, err := clones[0].FileClaims(ctx)
	if err != nil || len(all) != 80 {
		t.Fatalf("live claims: %d, %v; want 80 (2 paths x 40 rounds)", len(all), err)
	}
}

// TestL8_FileClaimTTLAndRelease: a claim lasts its TTL, a renewal extends
// it, another clone's claim gets in once it expired or was released, and
// a person's release ends it whoever holds it.
func TestL8_FileClaimTTLAndRelease(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	a, b := openClone(t, dsn, "ws", 1, 0), openClone(t, dsn, "ws", 2, 0)
	sa, sb := Session{ID: 1, Name: "ADA"}, Session{ID: 1, Name: "BOB"}
	claim := func(s *Store, ses Session, path string, ttl time.Duration) FilesResult {
		res, err := s.ClaimFiles(ctx, FilesRequest{Session: ses, Paths: []string{path}, TTL: ttl, Exclusive: true}, prefixOverlap)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	claim(a, sa, "x.go", time.Second)
	if res := claim(b, sb, "x.go", time.Minute); len(res.Conflicts) != 1 || res.Conflicts[0].Holder != "ADA" || res.Conflicts[0].HolderOn(b.Clone()) != "ADA on host1" {
		t.Fatalf("while ADA holds it: %+v", res)
	}
	if res := claim(a, sa, "x.go", 2*time.Second); res.Renewed != 1 {
		t.Fatalf("renewal: %+v", res)
	}
	time.Sleep(2200 * time.Millisecond) // the renewed 2 s claim expires: time itself, no signal to wait on
	if res := claim(b, sb, "x.go", time.Minute); len(res.Conflicts) != 0 {
		t.Fatalf("after ADA's claim expired: %+v", res)
	}
	if err := b.ReleaseFiles(ctx, sb.ID, nil, "done"); err != nil {
		t.Fatal(err)
	}
	if res := claim(a, sa, "x.go", time.Minute); len(res.Conflicts) != 0 {
		t.Fatalf("after BOB released: %+v", res)
	}
	out, err := b.ForceReleaseFile(ctx, "x.go", "released by dana: stuck")
	if err != nil || len(out) != 1 || out[0].Holder != "ADA" {
		t.Fatalf("a person's release: %+v %v", out, err)
	}
	if live, _ := a.FileClaims(ctx); len(live) != 0 {
		t.Fatalf("claims after a person's release: %+v", live)
	}
	claim(a, sa, "y.go", time.Minute)
	if _, err := a.EndSession(ctx, sa.ID, "gone"); err != nil {
		t.Fatal(err)
	}
	if live, _ := b.FileClaims(ctx); len(live) != 0 {
		t.Fatalf("claims after their session ended: %+v", live)
	}
}

// TestBranchLeaseAcrossClones: one session writes a branch's graph at a
// time, on any clone; the holder renews; another gets in once it expired
// or its session ended.
func TestBranchLeaseAcrossClones(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	a, b := openClone(t, dsn, "ws", 1, 0), openClone(t, dsn, "ws", 2, 0)
	sa, sb := Session{ID: 1, Name: "ADA"}, Session{ID: 1, Name: "BOB"}
	if _, ok, err := a.TakeBranch(ctx, "main", sa, time.Second); !ok || err != nil {
		t.Fatalf("take: %v %v", ok, err)
	}
	held, ok, err := b.TakeBranch(ctx, "main", sb, time.Second)
	if ok || err != nil || held.Holder != "ADA" || held.Host != "host1" {
		t.Fatalf("taken while held: %v %+v %v", ok, held, err)
	}
	if _, ok, _ := b.TakeBranch(ctx, "feat/x", sb, time.Second); !ok {
		t.Fatal("another branch is free")
	}
	if _, ok, _ := a.TakeBranch(ctx, "main", sa, time.Second); !ok {
		t.Fatal("the holder renews")
	}
	time.Sleep(1100 * time.Millisecond) // the 1 s hold of the branch expires: time itself, no signal to wait on
	if _, ok, _ := b.TakeBranch(ctx, "main", sb, time.Minute); !ok {
		t.Fatal("expired: another gets it")
	}
	if _, err := b.EndSession(ctx, sb.ID, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.TakeBranch(ctx, "main", sa, time.Minute); !ok {
		t.Fatal("the holder's session ended: another gets it")
	}
}

// TestAuditBatchAndNames: the shared audit log holds every clone's
// entries with its machine; a clone sees the live names of the others.
func TestAuditBatchAndNames(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	a, b := openClone(t, dsn, "ws", 1, 0), openClone(t, dsn, "ws", 2, 0)
	if err := a.AuditBatch(ctx, []Entry{{Actor: "agent", Agent: "ADA", Action: "claim", TaskID: "T1", Outcome: "ok"},
		{Actor: "agent", Agent: "ADA", Action: "tool", Outcome: "ok", Detail: "snag_list list"}}); err != nil {
		t.Fatal(err)
	}
	log, err := b.AuditLog(ctx, 0, 10)
	if err != nil || len(log) != 2 || log[0].Host != "host1" || log[0].Action != "claim" {
		t.Fatalf("the shared log seen from clone 2: %+v %v", log, err)
	}
	a.Register(ctx, Session{ID: 1, Name: "ADA"})
	b.Register(ctx, Session{ID: 1, Name: "BOB"})
	if names, _ := b.LiveNames(ctx); len(names) != 1 || names[0] != "ADA" {
		t.Fatalf("names of the other clones, seen from clone 2: %v", names)
	}
}
