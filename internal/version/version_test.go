package version_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/version"
)

func TestFromBuildInfo(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "dev"},
		{"go install at a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"go build in a checkout", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201120000-0123456789ab+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}}}, "v0.0.0-20261201120000-0123456789ab+dirty"},
		{"a commit only", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, "dev-0123456789ab"},
		{"a commit with changes", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, "dev-0123456789ab-dirty"},
		{"nothing recorded", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := version.FromBuildInfo(tt.bi); got != tt.want {
				t.Errorf("FromBuildInfo = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBuiltWithoutLdflags builds snag and snagd as go build and go install
// do, with no -ldflags, from a git repository holding a copy of this
// checkout (one commit, no tags: Go records the version of a git worktree's
// checkout only from a plain clone). Every way of asking for the version
// must give the pseudo-version Go makes of that commit, with +dirty once a
// file is changed. It asks for -buildvcs=true, Go's default in a checkout,
// so that a GOFLAGS=-buildvcs=false in the go env does not turn the
// recording off. Then it builds them as make build does and checks the
// stamp wins.
func TestBuiltWithoutLdflags(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed: .ci/run must install it")
		}
		t.Skip("git is not installed")
	}
	src := copyCheckout(t, moduleRoot(t))
	git := func(args ...string) string {
		t.Helper()
		return run(t, src, "git", append([]string{"-c", "user.name=snag test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "snapshot")
	rev := strings.TrimSpace(git("rev-parse", "HEAD"))[:12]

	check := func(dirty bool) {
		t.Helper()
		bin := t.TempDir()
		run(t, src, "go", "build", "-buildvcs=true", "-o", bin, "./cmd/snag", "./cmd/snagd")
		for _, c := range [][]string{{"snag", "version"}, {"snag", "--version"}, {"snagd", "--version"}} {
			out := strings.TrimSpace(run(t, bin, filepath.Join(bin, c[0]), c[1]))
			name, v, _ := strings.Cut(out, " ")
			want := "-" + rev
			if dirty {
				want += "+dirty"
			}
			if name != c[0] || !strings.HasPrefix(v, "v0.0.0-") || !strings.HasSuffix(v, want) {
				t.Errorf("%s printed %q, want %s v0.0.0-TIME%s", strings.Join(c, " "), out, c[0], want)
			}
		}
	}
	check(false)

	f, err := os.OpenFile(filepath.Join(src, "README.md"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\nA local change.\n")
	f.Close()
	check(true)

	stamped := t.TempDir()
	run(t, src, "go", "build", "-ldflags", "-X github.com/snagdev/snag/internal/version.stamp=v9.8.7-test", "-o", stamped, "./cmd/snag", "./cmd/snagd")
	for _, c := range [][]string{{"snag", "version"}, {"snagd", "--version"}} {
		if out, want := run(t, stamped, filepath.Join(stamped, c[0]), c[1]), c[0]+" v9.8.7-test\n"; out != want {
			t.Errorf("%s built with the stamp printed %q, want %q", strings.Join(c, " "), out, want)
		}
	}
}

// copyCheckout copies the files git knows in root, tracked or not but not
// ignored, as they are in the working tree, to a temp folder.
func copyCheckout(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git ls-files in %s: %v: run the tests in a git clone", root, err)
		}
		t.Skipf("%s is not a git checkout: %v", root, err)
	}
	dst := t.TempDir()
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	gomod := strings.TrimSpace(run(t, ".", "go", "env", "GOMOD"))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("go env GOMOD: not in a module")
	}
	return filepath.Dir(gomod)
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	return string(out)
}
