package gitdir

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestWorktreesShareTheCommonDir uses real git: a repository and a second
// worktree of it report the same common folder; another repository does not.
func TestWorktreesShareTheCommonDir(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed: .ci/run must install it")
		}
		t.Skip("git is not installed")
	}
	tmp := t.TempDir()
	main := filepath.Join(tmp, "main")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.Mkdir(main, 0o755)
	git(main, "init", "-q")
	git(main, "commit", "-q", "--allow-empty", "-m", "first")
	git(main, "worktree", "add", "-q", filepath.Join(tmp, "wt"))
	other := filepath.Join(tmp, "other")
	os.Mkdir(other, 0o755)
	git(other, "init", "-q")

	sub := filepath.Join(tmp, "wt", "deep", "er")
	os.MkdirAll(sub, 0o755)
	a, b, c := Common(main), Common(sub), Common(other)
	if a == "" || a != b {
		t.Errorf("main %q and worktree %q differ; want the same common folder", a, b)
	}
	if c == a || c == "" {
		t.Errorf("another repository reports %q", c)
	}
	wts := Worktrees(a)
	if len(wts) != 2 || wts[0] != Top(main) || wts[1] != Top(sub) {
		t.Errorf("Worktrees(%q) = %q; want the tops of main and wt: %q, %q", a, wts, Top(main), Top(sub))
	}
	if got := Common(t.TempDir()); got != "" {
		t.Errorf("a folder outside git reports %q", got)
	}
}
