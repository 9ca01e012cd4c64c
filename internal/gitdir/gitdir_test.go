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
	// The worktrees of one repository share one state folder, in its
	// common folder; a folder outside git keeps its own in .snag/.
	if s1, s2 := State(main), State(sub); s1 != s2 || s1 != filepath.Join(a, StateFolder) {
		t.Errorf("State(main) = %q, State(worktree) = %q; want both %q", s1, s2, filepath.Join(a, StateFolder))
	}
	if State(other) == State(main) {
		t.Errorf("another repository shares the state folder %q", State(other))
	}
	plain := t.TempDir()
	if got := State(plain); got != filepath.Join(plain, ".snag") {
		t.Errorf("State outside git = %q; want %q", got, filepath.Join(plain, ".snag"))
	}
	if got := Main(a); got != Top(main) {
		t.Errorf("Main(%q) = %q; want %q", a, got, Top(main))
	}
	for branch, want := range map[string]bool{"snag/SNAG-3": true, "snag/": false, "main": false, "feature/snag": false} {
		if TaskBranch(branch) != want {
			t.Errorf("TaskBranch(%q) = %v; want %v", branch, !want, want)
		}
	}
}

// Every way of writing one remote gives one workspace name.
func TestRemoteName(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"git@host:acme/shop.git", "host/acme/shop"},
		{"git@host:acme/shop", "host/acme/shop"},
		{"https://host/acme/shop", "host/acme/shop"},
		{"https://host/acme/shop.git", "host/acme/shop"},
		{"https://host/acme/shop/", "host/acme/shop"},
		{"https://user:secret@host/acme/shop.git", "host/acme/shop"},
		{"ssh://git@host:22/acme/shop.git", "host/acme/shop"},
		{"ssh://git@host/acme/shop", "host/acme/shop"},
		{"git://host/acme/shop.git", "host/acme/shop"},
		{"HTTPS://Host.Example.COM/Acme/Shop.git", "host.example.com/Acme/Shop"},
		{"  git@host:acme/shop.git\n", "host/acme/shop"},
		{"host:acme/shop.git", "host/acme/shop"},
		{"https://host:8443/group/sub/shop.git", "host/group/sub/shop"},
		{"/srv/git/shop.git", "/srv/git/shop"},
		{"file:///srv/git/shop.git", "/srv/git/shop"},
		{"../shop.git", "../shop"},
		{"", ""},
	} {
		if got := RemoteName(c.url); got != c.want {
			t.Errorf("RemoteName(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}

// Origin, Head and Workspace read what git wrote: the remote's URL, the
// branch and commit checked out (a worktree's own, packed refs, a
// detached HEAD), and the workspace from config, remote or folder.
func TestOriginHeadAndWorkspace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed: .ci/run must install it")
		}
		t.Skip("git is not installed")
	}
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "shop")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	os.MkdirAll(repo, 0o755)
	git(repo, "init", "-q", "-b", "main")
	if b, c, ok := Head(repo); !ok || b != "main" || c != "" {
		t.Errorf("a repository with no commit: %q %q %v", b, c, ok)
	}
	if w := Workspace(repo, ""); w != "shop" {
		t.Errorf("no remote: workspace %q, want the folder's name", w)
	}
	git(repo, "commit", "-q", "--allow-empty", "-m", "one")
	git(repo, "remote", "add", "origin", "git@Host:acme/shop.git")
	if o := Origin(Common(repo)); o != "git@Host:acme/shop.git" {
		t.Errorf("Origin = %q", o)
	}
	if w := Workspace(repo, ""); w != "host/acme/shop" {
		t.Errorf("workspace %q", w)
	}
	if w := Workspace(repo, " acme "); w != "acme" {
		t.Errorf("a configured workspace: %q", w)
	}
	head := git(repo, "rev-parse", "HEAD")
	if b, c, ok := Head(repo); b != "main" || c+"\n" != head || !ok {
		t.Errorf("Head = %q %q %v, want main %s", b, c, ok, head)
	}
	wt := filepath.Join(tmp, "lexer")
	git(repo, "worktree", "add", "-q", "-b", "feat/lexer", wt)
	git(wt, "commit", "-q", "--allow-empty", "-m", "two")
	if b, c, _ := Head(wt); b != "feat/lexer" || c+"\n" != git(wt, "rev-parse", "HEAD") {
		t.Errorf("the worktree's Head = %q %q", b, c)
	}
	git(repo, "pack-refs", "--all")
	if b, c, _ := Head(wt); b != "feat/lexer" || c+"\n" != git(wt, "rev-parse", "HEAD") {
		t.Errorf("Head from packed refs = %q %q", b, c)
	}
	git(wt, "checkout", "-q", "--detach")
	if b, c, _ := Head(wt); b != "HEAD" || c+"\n" != git(wt, "rev-parse", "HEAD") {
		t.Errorf("a detached Head = %q %q", b, c)
	}
	if _, _, ok := Head(tmp); ok {
		t.Error("Head of a folder that is no worktree")
	}
}
