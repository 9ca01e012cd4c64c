package filesync_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/workspace/workspacetest"
)

// truncated serves the sample project with opts and empties the file of
// SNAG-11 in place, as an editor does before it writes the new bytes. It
// returns the engine, the stop of its workspace and the path the index
// holds the file under, once the engine has made a second look at it due.
func truncated(t *testing.T, opts engine.Options) (e *engine.Engine, stop func(), path string) {
	t.Helper()
	opts.Root = workspacetest.Sample(t)
	e, stop = serve(t, opts)
	ref, _ := queue.ParseRef("SNAG-11")
	it, err := e.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(e.Project().Abs(it.Path), 0); err != nil {
		t.Fatal(err)
	}
	waitProgress(t, e, "a second look made due", func(p engine.Progress) bool { return p.SettlesDue > 0 })
	return e, stop, it.Path
}

// waitProgress polls e's counts of its background work until done accepts
// them, for at most 20 s.
func waitProgress(t *testing.T, e *engine.Engine, what string, done func(engine.Progress) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !done(e.Progress()) {
		select {
		case <-deadline:
			t.Fatalf("no %s after 20 s: %+v", what, e.Progress())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// stateOf is the state the index holds of the file at path.
func stateOf(t *testing.T, e *engine.Engine, path string) string {
	t.Helper()
	state, found, err := e.Project().DB.StateOf(context.Background(), path)
	if err != nil || !found {
		t.Fatalf("%s in the index: found %v, %v", path, found, err)
	}
	return state
}

// A file that reads as broken while its row is good is not believed until
// its second look: the row stays good meanwhile. The look still due when
// the workspace closes is called off, and counted as done.
func TestABrokenSaveWaitsForItsSecondLook(t *testing.T) {
	e, stop, path := truncated(t, engine.Options{Settle: time.Hour})
	if got := stateOf(t, e, path); got != snag.StateOK {
		t.Errorf("the row of the emptied file is %s before its second look; want %s", got, snag.StateOK)
	}
	stop()
	if p := e.Progress(); p.Settles != p.SettlesDue {
		t.Errorf("after close: %d second looks taken or called off of %d due; want all", p.Settles, p.SettlesDue)
	}
}

// A file that still reads as broken at its second look is believed then.
func TestABrokenSaveIsBelievedAtItsSecondLook(t *testing.T) {
	e, _, path := truncated(t, engine.Options{})
	waitProgress(t, e, "the second look", func(p engine.Progress) bool { return p.Settles >= p.SettlesDue })
	if got := stateOf(t, e, path); got != snag.StateInvalid {
		t.Errorf("the row of the emptied file is %s after its second look; want %s", got, snag.StateInvalid)
	}
}
