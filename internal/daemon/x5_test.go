package daemon_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snagd "github.com/snagdev/snag/internal/daemon"
)

// TestX5_SnagdRefusesAnUnsafeToken starts real snagd processes over token
// files that others could read or swap: each refuses to start, names the
// fix, and never binds a port.
func TestX5_SnagdRefusesAnUnsafeToken(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, home string)
		fix   string
	}{
		{"file readable by others", func(t *testing.T, home string) {
			chmod(t, filepath.Join(home, "token"), 0o644)
		}, "chmod 600"},
		{"folder open to others", func(t *testing.T, home string) {
			chmod(t, home, 0o755)
		}, "chmod 700"},
		{"file is a symlink", func(t *testing.T, home string) {
			p := filepath.Join(home, "token")
			target := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.Rename(p, target); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, "snag token rotate"},
		{"file of another user", func(t *testing.T, home string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can give a file to another user")
			}
			if err := os.Chown(filepath.Join(home, "token"), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "belongs to another user: remove it and run snag token rotate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := sampleProject(t)
			home := filepath.Join(t.TempDir(), "home")
			// A first, clean start (in process) creates the token; then it
			// is made unsafe, and snagd is started as a person would.
			d := startInProcess(t, root, home, snagd.Options{})
			d.terminate()
			c.setup(t, home)

			cmd := exec.Command(snagdBin, "--root", root, "--port", "0")
			cmd.Env = append(os.Environ(), "SNAG_HOME="+home)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatal("snagd kept running over an unsafe token")
			}
			if err == nil {
				t.Fatalf("snagd started over an unsafe token:\n%s", out)
			}
			if !strings.Contains(string(out), c.fix) {
				t.Errorf("snagd's error does not name the fix %q:\n%s", c.fix, out)
			}
			if _, err := os.Stat(filepath.Join(root, ".snag", ".port")); err == nil {
				t.Error("snagd wrote .snag/.port: it bound a port before checking the token")
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
