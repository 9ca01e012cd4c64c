package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/snagdev/snag/coord"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/queue"
)

// openAlone opens an engine on root as snagd alone does: a member of the
// repository's embedded live state. The engine's background loops are not
// run; a test drives what it needs.
func openAlone(t *testing.T, root string) *Engine {
	t.Helper()
	ctx := context.Background()
	live, err := coord.OpenEmbedded(ctx, filepath.Join(t.TempDir(), coord.EmbeddedFile),
		coord.Options{Host: "test", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Close)
	e, err := Open(ctx, Options{Root: root, Home: t.TempDir(), Coord: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	e.Rescan(ctx)
	e.teamReconcile(ctx) // as Run's team loop does first
	if !e.Ready() {
		t.Fatal("the first rescan did not make the engine ready")
	}
	return e
}

// A claim of the next task is granted whatever the timing of the
// publication of the ready tasks: a task added just before, while the
// publication runs beside the claim as snagd's ticker does, is claimed,
// never answered as held through other clones.
func TestClaimNextRacesThePublication(t *testing.T) {
	e := openAlone(t, sample(t))
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg.Go(func() {
		for ctx.Err() == nil {
			e.teamPublish(ctx)
		}
	})
	// The sample's ready tasks are taken first, so that each added task is
	// the one ready task when its claim runs.
	for i := 0; ; i++ {
		s, err := e.Register(ctx, index.Session{Name: fmt.Sprintf("DRAIN%d", i), Client: "test"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Claim(ctx, s, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if got.Task == nil {
			break
		}
	}
	for i := range 200 {
		if _, _, err := e.Add(ctx, NewTask{Title: fmt.Sprintf("Added %d", i)}, queue.Person, "dana"); err != nil {
			t.Fatal(err)
		}
		s, err := e.Register(ctx, index.Session{Name: fmt.Sprintf("AGENT%d", i), Client: "test"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Claim(ctx, s, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if got.Task == nil {
			t.Fatalf("claim %d after an add: nothing claimed: %s", i, got.Reason)
		}
	}
}
