package sessions_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/workspace/workspacetest"
)

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
	root := workspacetest.Sample(t)
	w, _ := workspacetest.Run(t, engine.Options{Root: root, Home: t.TempDir(), Coord: workspacetest.JoinLive(t, root, ""), Grace: 50 * time.Millisecond})
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
	root := workspacetest.Sample(t)
	live := workspacetest.JoinLive(t, root, "")
	w, stop := workspacetest.Run(t, engine.Options{Root: root, Home: t.TempDir(), Coord: live})
	s, err := w.Engine.Register(context.Background(), index.Session{Name: "VESPER", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	w, _ = workspacetest.Run(t, engine.Options{Root: root, Home: t.TempDir(), Coord: live, Grace: 50 * time.Millisecond})
	if why := waitEnded(t, w.Engine, s.ID); why != "did not reconnect after a restart" {
		t.Errorf("the session ended for %q; want did not reconnect after a restart", why)
	}
}

// The sweep ends a session whose process is gone, and counts its sweeps.
func TestTheSweepEndsASessionWhoseProcessIsGone(t *testing.T) {
	t.Parallel()
	root := workspacetest.Sample(t)
	w, _ := workspacetest.Run(t, engine.Options{Root: root, Home: t.TempDir(), Coord: workspacetest.JoinLive(t, root, ""), Sweep: 20 * time.Millisecond})
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
