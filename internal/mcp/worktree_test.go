package mcp_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/snagdtest"
)

// wtGit runs git in dir, failing the test on an error.
func wtGit(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Two bridges in two worktrees of one repository share the first
// worktree's snagd: one queue, one set of leases. Killing one bridge
// releases its lease within 5 s and leaves the other's alone.
func TestTwoWorktreesShareOneDaemon(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed: .ci/run must install it")
		}
		t.Skip("git is not installed")
	}
	e := newEnv(t)
	wtGit(t, e.root, "init", "-q")
	wtGit(t, e.root, "add", ".")
	wtGit(t, e.root, "commit", "-q", "-m", "tasks")
	wt := filepath.Join(filepath.Dir(e.root), "second")
	wtGit(t, e.root, "worktree", "add", "-q", wt)

	// The daemon takes the first free port of the default range, where a
	// client in another worktree looks for it.
	p := snagdtest.Start(t, snagdtest.Options{Bin: snagBin, Daemon: true, Root: e.root, Home: e.home, Env: []string{"SNAG_PORT="}})
	p.WaitReady(t, 60*time.Second)
	e.port = p.Port

	// The second worktree's bridge may not start a daemon of its own: it
	// must find the first one.
	second := &env{root: wt, home: e.home, port: e.port}
	csA, cmdA := e.bridge(t)
	csB, _ := second.bridge(t, "--no-autostart")
	res, txt, sc := call(t, csA, "snag_claim", nil)
	mustOK(t, "claim in the first worktree", res, txt)
	keyA := sc["task"].(map[string]any)["key"].(string)
	res, txt, sc = call(t, csB, "snag_claim", nil)
	mustOK(t, "claim in the second worktree", res, txt)
	if sc["source"] != "daemon" {
		t.Fatalf("the second worktree's bridge reads from %v, not the shared daemon", sc["source"])
	}
	keyB := sc["task"].(map[string]any)["key"].(string)
	if keyA == keyB {
		t.Fatalf("both worktrees' agents were given %s", keyA)
	}
	// One queue: the second worktree sees the first one's claim.
	if _, _, sc := call(t, csB, "snag_get", map[string]any{"id": keyA}); sc["task"].(map[string]any)["status"] != "claimed" {
		t.Errorf("the second worktree sees %s as %v", keyA, sc["task"].(map[string]any)["status"])
	}

	cmdA.Process.Signal(syscall.SIGKILL)
	waitOpen(t, csB, keyA, 5*time.Second, "its bridge was killed")
	if _, _, sc := call(t, csB, "snag_get", map[string]any{"id": keyB}); sc["task"].(map[string]any)["status"] != "claimed" {
		t.Errorf("the living bridge's %s is %v after the other bridge died", keyB, sc["task"].(map[string]any)["status"])
	}
}
