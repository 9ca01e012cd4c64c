// Package worktrees gives a task a git worktree of its own: a claim that
// asks for one is the engine's Claim, and then `git worktree add` on a
// branch snag/<key>; it lists the task worktrees of the repository, and
// prunes those of finished tasks when no work would be lost.
//
// It uses the engine over the small seam it declares (Engine), and must
// not import a transport (net/http, the daemon, mcp, the client, the
// board, the CLI) nor another service of the engine.
package worktrees

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Engine is what the service needs of the engine: its claim and release
// (the moves), the project's root and configuration, the audit, and the
// two calls of its seam (seam_worktrees.go). *engine.Engine satisfies it.
type Engine interface {
	Claim(ctx context.Context, s index.Session, ref *queue.Ref, force bool) (engine.Claimed, error)
	Release(ctx context.Context, s index.Session, ref queue.Ref, epoch int64, reason string) (engine.Released, error)
	Root() string
	Config() queue.Config
	Audit(ctx context.Context, a snag.AuditEntry)
	// WorktreeMade records on the live lease of the task id session s
	// holds the worktree made for it, and audits it.
	WorktreeMade(ctx context.Context, s index.Session, taskID, path, branch string) error
	// TaskStatus is the status of the task ref as the index has it.
	TaskStatus(ctx context.Context, ref queue.Ref) (queue.Status, error)
}

// Service makes, lists and prunes task worktrees. It is safe for
// concurrent use: worktrees are made one at a time.
type Service struct {
	e  Engine
	mu sync.Mutex // task worktrees are made one at a time
}

// New returns the worktrees service of the engine e.
func New(e Engine) *Service {
	return &Service{e: e}
}

// Claim is the engine's Claim, and when worktree is set (or the project's
// claim.worktree), a git worktree for the task: at the configured folder
// beside the repository's main worktree (default ../<repo>.snag/<key>),
// never inside another task's, on a branch snag/<key> from base (the
// branch the caller names; else the project's claim.base; else the
// repository's default branch). The worktree is recorded on the lease,
// and the task's verify runs there. A claim whose worktree cannot be made
// is given back, and the refusal says why.
func (w *Service) Claim(ctx context.Context, s index.Session, ref *queue.Ref, force, worktree bool, base string) (engine.Claimed, error) {
	c, err := w.e.Claim(ctx, s, ref, force)
	if err != nil || c.Task == nil || !(worktree || w.e.Config().Claim.Worktree) {
		return c, err
	}
	path, branch, err := w.taskWorktree(ctx, c.Task.Key, base)
	if err != nil {
		why := "its worktree could not be made: " + err.Error()
		w.e.Release(ctx, s, queue.Ref{ID: c.Task.ID}, c.Epoch, why)
		return engine.Claimed{}, &engine.Error{Kind: engine.ErrInvalid, Code: "worktree", Message: fmt.Sprintf(
			"claim %s: %s. The task went back to the queue; claim it without a worktree, "+
				"or fix the cause (snag worktrees lists them)", c.Task.Key, why)}
	}
	if err := w.e.WorktreeMade(ctx, s, c.Task.ID, path, branch); err != nil {
		return c, err
	}
	c.Worktree, c.Branch = path, branch
	return c, nil
}

// git runs git in dir and returns its trimmed output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// worktreeDir is the folder task worktrees go in, for the repository
// whose top folder is top.
func (w *Service) worktreeDir(top string) string {
	d := w.e.Config().Claim.WorktreeDir
	if d == "" {
		d = "../{repo}.snag"
	}
	d = strings.ReplaceAll(d, "{repo}", filepath.Base(top))
	if !filepath.IsAbs(d) {
		d = filepath.Join(top, d)
	}
	return filepath.Clean(d)
}

// taskWorktree makes (or finds again) the worktree of the task keyed key,
// from base ("": the default, see Claim). Worktrees are made one
// at a time: git's own locks would refuse two at once.
func (w *Service) taskWorktree(ctx context.Context, key, base string) (path, branch string, err error) {
	top := gitdir.Top(w.e.Root())
	if top == "" {
		return "", "", errors.New("the project is not in a git repository")
	}
	if main := gitdir.Main(gitdir.Common(top)); main != "" {
		top = main // beside the main worktree, whichever worktree asked
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	path = filepath.Join(w.worktreeDir(top), key)
	branch = "snag/" + key
	if _, err := os.Stat(path); err == nil {
		if head, err := git(ctx, path, "rev-parse", "--abbrev-ref", "HEAD"); err == nil && head == branch {
			return path, branch, nil // claimed again: its worktree is still there
		}
		return "", "", fmt.Errorf("%s is there and is not the worktree of %s on %s: move it away", path, key, branch)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", "", err
	}
	if _, err := git(ctx, top, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err == nil {
		_, err = git(ctx, top, "worktree", "add", "--quiet", path, branch)
		return path, branch, err
	}
	base = cmp.Or(base, w.e.Config().Claim.Base, defaultBranch(ctx, top))
	if _, err := git(ctx, top, "rev-parse", "--verify", "--quiet", base+"^{commit}"); err != nil {
		return "", "", fmt.Errorf("the base %q names no branch or commit of the repository: name one that exists (git branch lists them)", base)
	}
	_, err = git(ctx, top, "worktree", "add", "--quiet", "-b", branch, path, base)
	return path, branch, err
}

// defaultBranch is the repository's default branch, as seen from its main
// worktree top: the local branch origin's HEAD names, else the branch the
// main worktree is on, else its HEAD.
func defaultBranch(ctx context.Context, top string) string {
	if ref, err := git(ctx, top, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"); err == nil {
		if b, ok := strings.CutPrefix(ref, "origin/"); ok {
			if _, err := git(ctx, top, "rev-parse", "--verify", "--quiet", "refs/heads/"+b); err == nil {
				return b
			}
		}
		return ref
	}
	if b, _, ok := gitdir.Head(top); ok && b != "" && !gitdir.TaskBranch(b) {
		return b
	}
	return "HEAD"
}

// View is a task's worktree as snag worktrees lists it.
type View struct {
	Path   string
	Branch string
	Key    string
	Status queue.Status // the task's; "" when no task has the key
	Merged bool         // the branch is merged into the base
	Clean  bool         // no change in the worktree, staged or not, and no untracked file
}

// List lists the task worktrees of the repository (those on a
// snag/<key> branch), with their tasks and whether each is merged and
// clean.
func (w *Service) List(ctx context.Context) ([]View, error) {
	top := gitdir.Top(w.e.Root())
	if top == "" {
		return nil, nil
	}
	out, err := git(ctx, top, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, err
	}
	base := cmp.Or(w.e.Config().Claim.Base, defaultBranch(ctx, top))
	merged := map[string]bool{}
	if m, err := git(ctx, top, "branch", "--format=%(refname:short)", "--merged", base); err == nil {
		for _, b := range strings.Fields(m) {
			merged[b] = true
		}
	}
	var vs []View
	var cur View
	flush := func() {
		if key, ok := strings.CutPrefix(cur.Branch, "snag/"); ok && cur.Path != "" {
			cur.Key = key
			if r, err := queue.ParseRef(key); err == nil {
				if st, err := w.e.TaskStatus(ctx, r); err == nil {
					cur.Status = st
				}
			}
			cur.Merged = merged[cur.Branch]
			st, err := git(ctx, cur.Path, "status", "--porcelain")
			cur.Clean = err == nil && st == ""
			vs = append(vs, cur)
		}
		cur = View{}
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "worktree "):
			flush()
			cur.Path = strings.TrimPrefix(line, "worktree ")
		case strings.HasPrefix(line, "branch refs/heads/"):
			cur.Branch = strings.TrimPrefix(line, "branch refs/heads/")
		}
	}
	flush()
	return vs, nil
}

// Prune removes the worktrees of resolved and cancelled tasks
// that are clean and whose branches are merged, with those branches: no
// work is lost. It keeps every other and says why. It returns what it removed and what it kept.
func (w *Service) Prune(ctx context.Context, by string) (removed, kept []View, why []string, err error) {
	vs, err := w.List(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	top := gitdir.Top(w.e.Root())
	for _, v := range vs {
		switch {
		case v.Status != queue.StatusResolved && v.Status != queue.StatusCancelled:
			kept, why = append(kept, v), append(why, fmt.Sprintf("%s is %s", v.Key, orNot(string(v.Status), "not a task")))
			continue
		case !v.Clean:
			kept, why = append(kept, v), append(why, v.Path+" has changes: commit or discard them")
			continue
		case !v.Merged:
			kept, why = append(kept, v), append(why, v.Branch+" is not merged: merge it, or remove the worktree by hand")
			continue
		}
		if _, err := git(ctx, top, "worktree", "remove", v.Path); err != nil {
			kept, why = append(kept, v), append(why, err.Error())
			continue
		}
		git(ctx, top, "branch", "-d", v.Branch)
		removed = append(removed, v)
		w.e.Audit(ctx, snag.AuditEntry{Actor: queue.Person, Agent: by, Action: "worktree_prune", Outcome: "ok",
			Detail: v.Path + " (" + v.Key + " " + string(v.Status) + ")"})
	}
	return removed, kept, why, nil
}

func orNot(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
