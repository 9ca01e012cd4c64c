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
	time.Sleep(2200 * time.Millisecond)
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
