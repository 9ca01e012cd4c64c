package fileclaims

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/repopath"
	"github.com/snagdev/snag/internal/snag"
)

// Check is what a check found of one path: the live claims that cover it
// or overlap it.
type Check struct {
	Path   string
	Claims []snag.FileClaim
}

// Check reports, for each of paths (cleaned as a claim of s would be; s
// may be nil, for a person), the live claims that overlap it.
func (f *Service) Check(ctx context.Context, s *index.Session, paths []string) ([]Check, error) {
	canon, err := f.canonical(s, paths)
	if err != nil {
		return nil, err
	}
	live, err := f.e.FileClaims(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Check, len(canon))
	for i, p := range canon {
		out[i].Path = p
		for _, c := range live {
			if repopath.Overlap(c.Path, p) {
				out[i].Claims = append(out[i].Claims, c)
			}
		}
	}
	return out, nil
}

// Guard checks staged paths (repository-relative, as git names them)
// against the live exclusive claims of every session but the committer's
// (named by committer; "" for none): it returns the claims each path
// would break, for a commit guard to refuse.
func (f *Service) Guard(ctx context.Context, committer string, paths []string) ([]Check, error) {
	live, err := f.e.FileClaims(ctx)
	if err != nil {
		return nil, err
	}
	fold := f.repos.repoOf(f.e.Root()).fold
	var out []Check
	for _, p := range paths {
		if fold {
			p = strings.ToLower(p)
		}
		var in []snag.FileClaim
		for _, c := range live {
			if c.Exclusive && !strings.EqualFold(c.Holder, committer) && repopath.Match(c.Path, p) {
				in = append(in, c)
			}
		}
		if len(in) > 0 {
			out = append(out, Check{Path: p, Claims: in})
		}
	}
	return out, nil
}

// HoldersOf says who holds the claims cs, grouped by holder, each with
// its paths and the seconds left at now: "LYNX holds web/app.ts, web/**
// (exclusive, 840 s left)".
func HoldersOf(cs []snag.FileClaim, now time.Time) string {
	type group struct {
		paths []string
		left  int
		excl  bool
	}
	var order []string
	by := map[string]*group{}
	for _, c := range cs {
		g, ok := by[c.Holder]
		if !ok {
			g = &group{left: 1 << 30}
			by[c.Holder] = g
			order = append(order, c.Holder)
		}
		g.paths = append(g.paths, c.Path)
		g.left = min(g.left, max(0, int(c.Expires.Sub(now).Seconds())))
		g.excl = g.excl || c.Exclusive
	}
	var parts []string
	for _, h := range order {
		g := by[h]
		parts = append(parts, fmt.Sprintf("%s holds %s (%s, %d s left)", h, strings.Join(g.paths, ", "), mode(g.excl), g.left))
	}
	return strings.Join(parts, "; ")
}

// repoRoots caches each worktree's repository top folder and whether its
// filesystem folds case: file claims name paths relative to it.
type repoRoots struct {
	mu sync.Mutex
	m  map[string]repoRoot
}

type repoRoot struct {
	top  string
	fold bool
}

// repoOf is the repository top folder of the worktree at root (the
// project root itself outside git), with symlinks resolved.
func (r *repoRoots) repoOf(root string) repoRoot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rr, ok := r.m[root]; ok {
		return rr
	}
	top := gitdir.Top(root)
	if top == "" {
		top = root
	}
	if real, err := filepath.EvalSymlinks(top); err == nil {
		top = real
	}
	rr := repoRoot{top: top, fold: repopath.CaseInsensitive(top)}
	if r.m == nil {
		r.m = map[string]repoRoot{}
	}
	r.m[root] = rr
	return rr
}
