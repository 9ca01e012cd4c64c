// Package gitdir finds the git repository a folder belongs to, by reading
// .git files and folders, without running git. snagd reports the common
// folder in /health and clients compare it, so agents in parallel
// worktrees of one repository can share one daemon.
//
// gitdir imports nothing of snag's.
package gitdir

import (
	"os"
	"path/filepath"
	"strings"
)

// Common returns the repository's shared git folder for dir: the same for
// every worktree of one repository (git rev-parse --git-common-dir, made
// absolute), or "" when dir is not in a git repository.
func Common(dir string) string {
	for {
		g := filepath.Join(dir, ".git")
		if fi, err := os.Stat(g); err == nil {
			if fi.IsDir() {
				return g
			}
			return fromFile(dir, g)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// fromFile follows a worktree's .git file, "gitdir: <main>/.git/worktrees/<name>",
// to the common folder named in that folder's commondir file.
func fromFile(dir, g string) string {
	b, err := os.ReadFile(g)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return ""
	}
	gitdir = strings.TrimSpace(gitdir)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(dir, gitdir)
	}
	c, err := os.ReadFile(filepath.Join(gitdir, "commondir"))
	if err != nil {
		return filepath.Clean(gitdir)
	}
	common := strings.TrimSpace(string(c))
	if !filepath.IsAbs(common) {
		common = filepath.Join(gitdir, common)
	}
	return filepath.Clean(common)
}

// Top returns the top folder of the worktree dir is in (the folder that
// holds its .git), or "" when dir is not in a git repository.
func Top(dir string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Worktrees returns the top folders of every worktree of the repository
// whose common folder is common (see [Common]): the main one (when the
// repository is not bare) and each one git worktree add made, as recorded
// in common/worktrees/*/gitdir. Worktrees whose folder is gone are left out.
func Worktrees(common string) []string {
	var out []string
	if filepath.Base(common) == ".git" {
		out = append(out, filepath.Dir(common))
	}
	ents, _ := os.ReadDir(filepath.Join(common, "worktrees"))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(common, "worktrees", e.Name(), "gitdir"))
		if err != nil {
			continue
		}
		g := strings.TrimSpace(string(b))
		if !filepath.IsAbs(g) {
			g = filepath.Join(common, "worktrees", e.Name(), g)
		}
		top := filepath.Dir(filepath.Clean(g))
		if _, err := os.Stat(top); err == nil {
			out = append(out, top)
		}
	}
	return out
}
