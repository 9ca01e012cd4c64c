package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A snagd whose project folder is removed (a deleted worktree) stops by
// itself instead of holding a port for nothing.
func TestSnagdStopsWhenItsProjectIsRemoved(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startDaemon(t, root, "")
	if err := os.RemoveAll(filepath.Join(root, ".snag")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		t.Fatal("snagd still runs 20 s after its .snag/ folder was removed")
	}
	if d.err != nil {
		t.Errorf("snagd exited with %v, want a clean exit", d.err)
	}
	if !strings.Contains(d.log.String(), ".snag/ folder is gone") {
		t.Errorf("the log does not say why snagd stopped:\n%s", d.log.String())
	}
}

// With --exit-idle, a snagd nobody uses stops; one with an agent's session
// stream open does not, however long the agent is quiet.
func TestExitIdle(t *testing.T) {
	t.Parallel()
	t.Run("unused", func(t *testing.T) {
		d := startDaemon(t, sampleProject(t), "", "--exit-idle", "1s")
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			t.Fatal("snagd with --exit-idle 1s still runs after 30 s unused")
		}
		if d.err != nil {
			t.Errorf("snagd exited with %v, want a clean exit", d.err)
		}
		if !strings.Contains(d.log.String(), "idle") {
			t.Errorf("the log does not say snagd stopped for idleness:\n%s", d.log.String())
		}
	})
	t.Run("agent connected", func(t *testing.T) {
		root := sampleProject(t)
		d := startDaemon(t, root, "", "--exit-idle", "5s")
		a := startAgent(t, d, "idle") // answers once its stream is open
		// The agent's last request came before now: a check that looks
		// 5 s from now finds nothing used snagd for 5 s but the agent's
		// open stream. Checks are counted as they begin, and the loop
		// begins the next only once one found snagd in use: the second
		// counted after the 5 s mark proves the first looked, and kept it.
		quiet := time.Now().Add(5 * time.Second)
		mark := int64(-1)
		eventually(t, "two idle checks after the 5 s mark", func() bool {
			select {
			case <-d.done:
				t.Fatalf("snagd stopped while an agent was connected:\n%s", d.log.String())
			default:
			}
			n := d.progress().IdleChecks
			if mark < 0 {
				if time.Now().After(quiet) {
					mark = n
				}
				return false
			}
			return n >= mark+2
		})
		a.cmd.Process.Kill()
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			t.Fatal("snagd still runs 30 s after its last agent left")
		}
	})
}
