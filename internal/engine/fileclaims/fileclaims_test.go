package fileclaims_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/engine/fileclaims"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/workspace/workspacetest"
)

// paths are the claims' paths, in order.
func paths(cs []snag.FileClaim) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Path)
	}
	return out
}

// TestClaimIsAllOrNothing: an exclusive claim refuses every overlapping
// claim of another session, whole, naming the holder; shared claims
// overlap each other; a claim names the task it is for.
func TestClaimIsAllOrNothing(t *testing.T) {
	w := workspacetest.Open(t)
	f, ctx := w.FileClaims, context.Background()
	ada, bea := workspacetest.Register(t, w, "ADA"), workspacetest.Register(t, w, "BEA")
	got, err := f.Claim(ctx, ada, fileclaims.Request{Paths: []string{"web/app.ts", "./web/app.ts"}, Task: "snag-1"})
	if err != nil || !got.Granted {
		t.Fatalf("ADA's claim: %+v, %v", got, err)
	}
	if diff := cmp.Diff([]string{"web/app.ts"}, paths(got.Claims)); diff != "" {
		t.Fatalf("ADA's claims (-want +got):\n%s", diff)
	}
	if got.Claims[0].TaskID == "" || !got.Claims[0].Exclusive {
		t.Fatalf("ADA's claim %+v: want exclusive, for SNAG-1", got.Claims[0])
	}
	got, err = f.Claim(ctx, bea, fileclaims.Request{Paths: []string{"docs/readme.md", "web/**"}})
	if !errors.Is(err, engine.ErrFilesHeld) || got.Granted {
		t.Fatalf("BEA's claim over ADA's: %+v, %v, want refused as held", got, err)
	}
	if !strings.Contains(err.Error(), "ADA holds web/app.ts (exclusive, ") {
		t.Fatalf("the refusal %q does not name ADA's claim", err)
	}
	if diff := cmp.Diff([]string{"web/app.ts"}, paths(got.Conflicts)); diff != "" {
		t.Fatalf("the conflicts (-want +got):\n%s", diff)
	}
	checks, err := f.Check(ctx, nil, []string{"docs/readme.md", "web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 2 || len(checks[0].Claims) != 0 || diffPaths(checks[1].Claims, "web/app.ts") != "" {
		t.Fatalf("the check after the refusal: %+v, want docs/readme.md unclaimed (nothing was) and web held by ADA", checks)
	}
	for _, s := range []index.Session{ada, bea} {
		got, err := f.Claim(ctx, s, fileclaims.Request{Paths: []string{"docs/**"}, Shared: true})
		if err != nil || !got.Granted {
			t.Fatalf("%s's shared claim: %+v, %v", s.Name, got, err)
		}
	}
	all, err := f.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("the live claims: %+v, want ADA's two and BEA's shared one", all)
	}
	again, err := f.Claim(ctx, ada, fileclaims.Request{Paths: []string{"web/app.ts"}})
	if err != nil || again.Renewed != 1 {
		t.Fatalf("ADA's claim again: %+v, %v, want a renewal", again, err)
	}
}

func diffPaths(cs []snag.FileClaim, want ...string) string { return cmp.Diff(want, paths(cs)) }

// TestClaimRefusals: a claim out of bounds is refused, naming the fix,
// and claims nothing.
func TestClaimRefusals(t *testing.T) {
	w := workspacetest.Open(t)
	f, ctx := w.FileClaims, context.Background()
	ada := workspacetest.Register(t, w, "ADA")
	many := make([]string, 101)
	for i := range many {
		many[i] = "f" + strings.Repeat("x", i)
	}
	for _, tc := range []struct {
		name string
		r    fileclaims.Request
		code string
		kind error
	}{
		{"no paths", fileclaims.Request{}, "no_paths", engine.ErrInvalid},
		{"too many paths", fileclaims.Request{Paths: many}, "too_many_paths", engine.ErrInvalid},
		{"ttl over a day", fileclaims.Request{Paths: []string{"a.go"}, TTL: 25 * time.Hour}, "bad_ttl", engine.ErrInvalid},
		{"negative ttl", fileclaims.Request{Paths: []string{"a.go"}, TTL: -time.Second}, "bad_ttl", engine.ErrInvalid},
		{"path too long", fileclaims.Request{Paths: []string{strings.Repeat("a", 513)}}, "bad_path", engine.ErrInvalid},
		{"path outside", fileclaims.Request{Paths: []string{"../elsewhere.go"}}, "bad_path", engine.ErrInvalid},
		{"bad task ref", fileclaims.Request{Paths: []string{"a.go"}, Task: "not a ref!"}, "bad_ref", engine.ErrInvalid},
		{"no such task", fileclaims.Request{Paths: []string{"a.go"}, Task: "SNAG-999"}, "not_found", engine.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.Claim(ctx, ada, tc.r)
			if workspacetest.CodeOf(err) != tc.code || !errors.Is(err, tc.kind) || got.Granted {
				t.Fatalf("claim %+v: %+v, %v, want refused %s", tc.r, got, err, tc.code)
			}
		})
	}
	all, err := f.List(ctx)
	if err != nil || len(all) != 0 {
		t.Fatalf("the live claims after the refusals: %+v, %v, want none", all, err)
	}
}

// TestRelease: a session releases its claims of paths, or all of them;
// a person frees a claim from whoever holds it, saying why.
func TestRelease(t *testing.T) {
	w := workspacetest.Open(t)
	f, ctx := w.FileClaims, context.Background()
	ada := workspacetest.Register(t, w, "ADA")
	if _, err := f.Claim(ctx, ada, fileclaims.Request{Paths: []string{"a.go", "b.go", "web/**"}}); err != nil {
		t.Fatal(err)
	}
	out, err := f.Release(ctx, ada, []string{"./a.go"})
	if err != nil || diffPaths(out, "a.go") != "" {
		t.Fatalf("ADA's release of a.go: %+v, %v", out, err)
	}
	if _, err := f.PersonRelease(ctx, "web/**", "dana", " "); workspacetest.CodeOf(err) != "no_reason" {
		t.Fatalf("a person's release with no reason: %v, want refused no_reason", err)
	}
	out, err = f.PersonRelease(ctx, "web/**", "dana", "ADA is stuck")
	if err != nil || diffPaths(out, "web/**") != "" || out[0].Holder != "ADA" {
		t.Fatalf("a person's release of web/**: %+v, %v", out, err)
	}
	if _, err := f.PersonRelease(ctx, "web/**", "dana", "again"); workspacetest.CodeOf(err) != "not_claimed" || !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a person's release of what no one claims: %v, want refused not_claimed", err)
	}
	out, err = f.Release(ctx, ada, nil)
	if err != nil || diffPaths(out, "b.go") != "" {
		t.Fatalf("ADA's release of all: %+v, %v, want b.go", out, err)
	}
	all, err := f.List(ctx)
	if err != nil || len(all) != 0 {
		t.Fatalf("the live claims after the releases: %+v, %v, want none", all, err)
	}
}

// TestGuard: a commit guard blocks the staged paths another session's
// exclusive claim covers, not the committer's own (its name in any
// case), nor a shared claim.
func TestGuard(t *testing.T) {
	w := workspacetest.Open(t)
	f, ctx := w.FileClaims, context.Background()
	ada, bea := workspacetest.Register(t, w, "ADA"), workspacetest.Register(t, w, "BEA")
	if _, err := f.Claim(ctx, ada, fileclaims.Request{Paths: []string{"web/**"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Claim(ctx, bea, fileclaims.Request{Paths: []string{"docs/**"}, Shared: true}); err != nil {
		t.Fatal(err)
	}
	staged := []string{"web/app.ts", "docs/readme.md", "main.go"}
	got, err := f.Guard(ctx, "BEA", staged)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Path != "web/app.ts" || diffPaths(got[0].Claims, "web/**") != "" {
		t.Fatalf("BEA's commit: blocked %+v, want web/app.ts by ADA's web/**", got)
	}
	for _, committer := range []string{"ada", "ADA"} {
		if got, err := f.Guard(ctx, committer, staged); err != nil || len(got) != 0 {
			t.Fatalf("%s's own commit: blocked %+v, %v, want nothing", committer, got, err)
		}
	}
}

// TestHoldersOf: the holders in the way, grouped, with the seconds left
// of the claim that ends first and exclusive when any is.
func TestHoldersOf(t *testing.T) {
	now := time.Now()
	cs := []snag.FileClaim{
		{Holder: "ADA", Path: "web/app.ts", Exclusive: true, Expires: now.Add(840 * time.Second)},
		{Holder: "BEA on build-2", Path: "docs/**", Expires: now.Add(60 * time.Second)},
		{Holder: "ADA", Path: "web/**", Expires: now.Add(900 * time.Second)},
		{Holder: "BEA on build-2", Path: "old.go", Expires: now.Add(-time.Second)},
	}
	want := "ADA holds web/app.ts, web/** (exclusive, 840 s left); BEA on build-2 holds docs/**, old.go (shared, 0 s left)"
	if got := fileclaims.HoldersOf(cs, now); got != want {
		t.Fatalf("HoldersOf:\n got %q\nwant %q", got, want)
	}
}
