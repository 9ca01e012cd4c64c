package sessions_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/workspace"
)

// sample copies .snag-example into a fresh project root, without plan.json.
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

// run opens a workspace on root with opts and runs it until the test ends
// (or stop is called); it returns once the first rescan is done.
func run(t *testing.T, opts engine.Options) (w *workspace.Workspace, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := workspace.Open(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stop = func() {
		if ctx.Err() != nil {
			return
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("workspace's Run: %v", err)
		}
		w.Close()
	}
	t.Cleanup(stop)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := w.Engine.WaitReady(wctx); err != nil {
		t.Fatalf("the first rescan is not done after 30 s: %v", err)
	}
	return w, stop
}

// waitEnded waits until the engine announces that session id has ended,
// and returns why; it fails the test after 30 s.
func waitEnded(t *testing.T, e *engine.Engine, id int64) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	var last int64
	for {
		evs, wait, _ := e.Events().Since(last)
		for _, ev := range evs {
			last = ev.ID
			if s, ok := ev.Data.(snag.SessionEvent); ok && s.ID == id && s.Ended {
				return s.Reason
			}
		}
		select {
		case <-wait:
		case <-deadline:
			t.Fatalf("session %d has not ended after 30 s", id)
		}
	}
}

// A session whose last stream closed ends once the grace is over, and its
// stream is no longer counted.
func TestAClosedStreamEndsTheSessionAfterTheGrace(t *testing.T) {
	t.Parallel()
	root := sample(t)
	w, _ := run(t, engine.Options{Root: root, Home: t.TempDir(), Coord: joinLive(t, root), Grace: 50 * time.Millisecond})
	s, err := w.Engine.Register(context.Background(), index.Session{Name: "VESPER", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	w.Sessions.StreamOpened(s.ID)
	if !w.Sessions.StreamOpen(s.ID) || w.Sessions.Streams() != 1 {
		t.Fatalf("after StreamOpened: StreamOpen %v, Streams %d; want true, 1", w.Sessions.StreamOpen(s.ID), w.Sessions.Streams())
	}
	w.Sessions.StreamClosed(s.ID)
	if w.Sessions.StreamOpen(s.ID) || w.Sessions.Streams() != 0 {
		t.Errorf("after StreamClosed: StreamOpen %v, Streams %d; want false, 0", w.Sessions.StreamOpen(s.ID), w.Sessions.Streams())
	}
	if why := waitEnded(t, w.Engine, s.ID); why != "stream closed" {
		t.Errorf("the session ended for %q; want stream closed", why)
	}
}

// A session live in snag.db when the workspace opens again (snagd
// restarted) gets the grace to reconnect, and ends when it does not.
func TestASessionThatDoesNotReconnectAfterARestartEnds(t *testing.T) {
	t.Parallel()
	root := sample(t)
	live := joinLive(t, root)
	w, stop := run(t, engine.Options{Root: root, Home: t.TempDir(), Coord: live})
	s, err := w.Engine.Register(context.Background(), index.Session{Name: "VESPER", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	w, _ = run(t, engine.Options{Root: root, Home: t.TempDir(), Coord: live, Grace: 50 * time.Millisecond})
	if why := waitEnded(t, w.Engine, s.ID); why != "did not reconnect after a restart" {
		t.Errorf("the session ended for %q; want did not reconnect after a restart", why)
	}
}

// The sweep ends a session whose process is gone, and counts its sweeps.
func TestTheSweepEndsASessionWhoseProcessIsGone(t *testing.T) {
	t.Parallel()
	root := sample(t)
	w, _ := run(t, engine.Options{Root: root, Home: t.TempDir(), Coord: joinLive(t, root), Sweep: 20 * time.Millisecond})
	agent := exec.Command("sleep", "600")
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	s, err := w.Engine.Register(context.Background(), index.Session{Name: "VESPER", Client: "test", PID: agent.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	if s.PIDStart == 0 || s.BootID == "" {
		t.Fatalf("the session was registered without its process's start time or the boot id: %+v", s)
	}
	before := w.Engine.Progress().Sweeps
	agent.Process.Kill()
	agent.Wait()
	if why := waitEnded(t, w.Engine, s.ID); why != "process gone" {
		t.Errorf("the session ended for %q; want process gone", why)
	}
	if after := w.Engine.Progress().Sweeps; after <= before {
		t.Errorf("Progress.Sweeps is %d after the sweep that ended the session, %d before; want more", after, before)
	}
}
