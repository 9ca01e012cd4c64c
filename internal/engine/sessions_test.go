package engine

import (
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/snagdev/snag/internal/index"
)

// TestL3_AnEndedSessionIsRefused: a session looked up (and so kept) is
// refused as ended once it has ended, and a lookup that read the row
// before the end does not keep it alive.
func TestL3_AnEndedSessionIsRefused(t *testing.T) {
	e := open(t, sample(t))
	ctx := context.Background()
	s, err := e.Register(ctx, index.Session{Name: "VESPER", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is answered from memory
		if got, err := e.Session(ctx, s.ID); err != nil || got.ID != s.ID || got.Name != "VESPER" {
			t.Fatalf("Session(%d): %+v, %v; want VESPER", s.ID, got, err)
		}
	}
	_, _, ends := e.live.lookup(s.ID)
	e.EndSession(s.ID, "test")
	if _, err := e.Session(ctx, s.ID); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("Session after its end: %v; want ErrSessionEnded", err)
	}
	e.live.keep(s, ends) // a read of the row made before the end
	if _, err := e.Session(ctx, s.ID); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("Session after a read from before its end was kept: %v; want ErrSessionEnded", err)
	}
}

// An agent started again asking for its name gets it at once: the gone
// session that had it is ended, and the live state hears of that end
// before it is asked whether the name is free. No team service runs here,
// so no sender would tell it later: the registration sends it itself.
func TestARestartedAgentGetsItsNameFromTheLiveState(t *testing.T) {
	t.Parallel()
	e := open(t, sample(t))
	ctx := context.Background()
	agent := exec.Command("sleep", "600")
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	old, err := e.Register(ctx, index.Session{Name: "WREN", Client: "test", PID: agent.Process.Pid})
	if err != nil || old.Name != "WREN" {
		t.Fatalf("Register WREN: %+v, %v", old, err)
	}
	agent.Process.Kill()
	agent.Wait()
	s, err := e.Register(ctx, index.Session{Name: "WREN", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "WREN" {
		t.Errorf("the agent started again asked for WREN and got %s", s.Name)
	}
	if _, err := e.Session(ctx, old.ID); !errors.Is(err, ErrSessionEnded) {
		t.Errorf("the gone session %d: %v; want ErrSessionEnded", old.ID, err)
	}
	ids, err := e.Coord().LiveSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != s.ID {
		t.Errorf("the live state's live sessions of this clone are %v; want [%d], the new one", ids, s.ID)
	}
}
