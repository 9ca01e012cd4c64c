package worktrees_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/workspace"
	"github.com/snagdev/snag/internal/workspace/workspacetest"
)

// git runs git in dir with no configuration of the machine's, and
// returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// run opens a workspace on a copy of the sample project committed to a
// new git repository, and runs it until the test ends, once it serves
// (workspacetest.Run).
func run(t *testing.T) *workspace.Workspace {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed: .ci/run must install it")
		}
		t.Skip("git is not installed")
	}
	root := filepath.Join(t.TempDir(), "shop")
	snagdtest.CopySample(t, root)
	git(t, root, "init", "-q", "-b", "main")
	git(t, root, "add", ".")
	git(t, root, "commit", "-q", "-m", "tasks")
	w, _ := workspacetest.Run(t, engine.Options{Root: root})
	return w
}

// claim claims ref with a worktree from base.
func claim(t *testing.T, w *workspace.Workspace, s index.Session, ref queue.Ref, base string) (engine.Claimed, error) {
	t.Helper()
	return w.Worktrees.Claim(context.Background(), s, &ref, false, true, base)
}

// A claim with a worktree makes one beside the repository on the task's
// branch; the list shows it with its task; prune keeps it while the task
// is live or the worktree has changes, and removes it (and its branch)
// once the task is done and nothing would be lost.
func TestWorktreeOfATask(t *testing.T) {
	t.Parallel()
	w := run(t)
	ctx := context.Background()
	e := w.Engine
	tk, _, err := e.Add(ctx, engine.NewTask{Title: "Give the task a worktree"}, queue.Person, "dana")
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Register(ctx, index.Session{Name: "ADA", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := claim(t, w, s, queue.Ref{ID: tk.ID}, "")
	if err != nil {
		t.Fatal(err)
	}
	wantPath := filepath.Join(filepath.Dir(e.Root()), "shop.snag", tk.Key)
	if c.Task == nil || c.Worktree != wantPath || c.Branch != "snag/"+tk.Key {
		t.Fatalf("the claim made %q on %q, want %q on snag/%s", c.Worktree, c.Branch, wantPath, tk.Key)
	}
	if head := git(t, c.Worktree, "rev-parse", "--abbrev-ref", "HEAD"); head != c.Branch {
		t.Errorf("the worktree is on %q, want %q", head, c.Branch)
	}

	vs, err := w.Worktrees.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Key != tk.Key || vs[0].Status != queue.StatusClaimed || !vs[0].Clean || !vs[0].Merged {
		t.Fatalf("the list is %+v, want %s's worktree, claimed, clean and merged", vs, tk.Key)
	}
	removed, kept, why, err := w.Worktrees.Prune(ctx, "dana")
	if err != nil || len(removed) != 0 || len(kept) != 1 || len(why) != 1 || why[0] != tk.Key+" is claimed" {
		t.Fatalf("prune of a claimed task's worktree: removed %v, kept %v (%q), %v; want it kept as claimed", removed, kept, why, err)
	}

	if _, err := e.PersonMove(ctx, queue.Ref{ID: tk.ID}, queue.ActCancel, "dana"); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(c.Worktree, "scratch.txt")
	if err := os.WriteFile(scratch, []byte("work in progress\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if removed, _, why, _ := w.Worktrees.Prune(ctx, "dana"); len(removed) != 0 || len(why) != 1 || !strings.Contains(why[0], "has changes") {
		t.Fatalf("prune of a worktree with changes: removed %v (%q), want it kept for its changes", removed, why)
	}
	if err := os.Remove(scratch); err != nil {
		t.Fatal(err)
	}
	removed, kept, _, err = w.Worktrees.Prune(ctx, "dana")
	if err != nil || len(removed) != 1 || len(kept) != 0 {
		t.Fatalf("prune of a cancelled task's clean, merged worktree: removed %v, kept %v, %v; want it removed", removed, kept, err)
	}
	if _, err := os.Stat(c.Worktree); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pruned worktree is still there: %v", err)
	}
	if branches := git(t, e.Root(), "branch", "--list", c.Branch); branches != "" {
		t.Errorf("the pruned worktree's branch is still there: %q", branches)
	}
}

// A claim whose worktree cannot be made (its base names nothing) is
// refused, saying why, and the task goes back to the queue.
func TestWorktreeThatCannotBeMadeGivesTheClaimBack(t *testing.T) {
	t.Parallel()
	w := run(t)
	ctx := context.Background()
	e := w.Engine
	tk, _, err := e.Add(ctx, engine.NewTask{Title: "Branch from nowhere"}, queue.Person, "dana")
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Register(ctx, index.Session{Name: "ADA", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = claim(t, w, s, queue.Ref{ID: tk.ID}, "no-such-branch")
	var refusal *engine.Error
	if !errors.Is(err, engine.ErrInvalid) || !errors.As(err, &refusal) || refusal.Code != "worktree" ||
		!strings.Contains(err.Error(), `the base "no-such-branch" names no branch`) || !strings.Contains(err.Error(), "went back to the queue") {
		t.Fatalf("got %v, want a worktree refusal naming the base", err)
	}
	it, err := e.Get(ctx, queue.Ref{ID: tk.ID})
	if err != nil {
		t.Fatal(err)
	}
	if it.Status != queue.StatusOpen {
		t.Errorf("the task is %s after its worktree failed, want open", it.Status)
	}
}
