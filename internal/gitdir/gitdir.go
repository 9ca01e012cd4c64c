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

// Head returns the branch checked out in the worktree whose top folder is
// top (git rev-parse --abbrev-ref HEAD: "HEAD" when detached) and the
// commit HEAD names (git rev-parse HEAD: "" on a branch with no commit
// yet), read from the worktree's HEAD file and its refs. ok is false when
// top is not a git worktree.
func Head(top string) (branch, commit string, ok bool) {
	g := filepath.Join(top, ".git")
	gitdir := g
	if fi, err := os.Stat(g); err != nil {
		return "", "", false
	} else if !fi.IsDir() {
		b, err := os.ReadFile(g)
		if err != nil {
			return "", "", false
		}
		line, _, _ := strings.Cut(string(b), "\n")
		d, found := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !found {
			return "", "", false
		}
		gitdir = strings.TrimSpace(d)
		if !filepath.IsAbs(gitdir) {
			gitdir = filepath.Join(top, gitdir)
		}
	}
	b, err := os.ReadFile(filepath.Join(gitdir, "HEAD"))
	if err != nil {
		return "", "", false
	}
	head := strings.TrimSpace(string(b))
	ref, symbolic := strings.CutPrefix(head, "ref:")
	if !symbolic {
		return "HEAD", head, true
	}
	ref = strings.TrimSpace(ref)
	return strings.TrimPrefix(ref, "refs/heads/"), resolveRef(Common(top), gitdir, ref), true
}

// resolveRef reads the commit a ref names: a loose ref in the worktree's
// own folder or the common one, else a line of packed-refs; "" when
// neither has it.
func resolveRef(common, gitdir, ref string) string {
	for _, d := range []string{gitdir, common} {
		if b, err := os.ReadFile(filepath.Join(d, filepath.FromSlash(ref))); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	b, err := os.ReadFile(filepath.Join(common, "packed-refs"))
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		sha, name, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && name == ref {
			return sha
		}
	}
	return ""
}

// Origin returns the URL of the remote named origin in the repository
// whose common folder is common (git remote get-url origin), read from its
// config file, or "".
func Origin(common string) string {
	b, err := os.ReadFile(filepath.Join(common, "config"))
	if err != nil {
		return ""
	}
	in := false
	for line := range strings.Lines(string(b)) {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "[") {
			in = strings.EqualFold(strings.Join(strings.Fields(strings.Trim(l, "[]")), " "), `remote "origin"`)
			continue
		}
		if !in {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "url") {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return ""
}

// RemoteName is a remote URL as a name that every way of writing it
// shares: host and path, without scheme, user, port, ".git" or slashes at
// the ends, the host in lower case. git@host:acme/shop.git,
// ssh://git@host:22/acme/shop and https://host/acme/shop/ are all
// host/acme/shop. A local path stays a cleaned path.
func RemoteName(url string) string {
	u := strings.TrimSpace(url)
	if u == "" {
		return ""
	}
	host, path := "", u
	if scheme, rest, ok := strings.Cut(u, "://"); ok && !strings.ContainsAny(scheme, "/@:") {
		if scheme == "file" {
			return strings.TrimSuffix(filepath.Clean(rest), ".git")
		}
		h, p, _ := strings.Cut(rest, "/")
		host, path = h, p
	} else if i := strings.Index(u, ":"); i > 0 && !strings.Contains(u[:i], "/") && !(len(u[:i]) == 1 && isLetter(u[0])) {
		host, path = u[:i], u[i+1:] // scp-like: [user@]host:path
	} else {
		return strings.TrimSuffix(filepath.Clean(u), ".git")
	}
	if _, h, ok := strings.Cut(host, "@"); ok {
		host = h
	}
	if h, port, ok := strings.Cut(host, ":"); ok && port != "" && strings.Trim(port, "0123456789") == "" {
		host = h
	}
	path = strings.Trim(path, "/")
	path = strings.TrimSuffix(path, ".git")
	path = strings.Trim(path, "/")
	return strings.ToLower(host) + "/" + path
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// Workspace is the workspace name of the project whose root is root:
// configured when it is set (workspace in .snag/config.json), else the
// repository's origin as [RemoteName] writes it, else the folder's name.
// Every clone of a repository has the same one.
func Workspace(root, configured string) string {
	if w := strings.TrimSpace(configured); w != "" {
		return w
	}
	if c := Common(root); c != "" {
		if o := RemoteName(Origin(c)); o != "" {
			return o
		}
	}
	return filepath.Base(root)
}

// StateFolder is the name of the folder in a repository's git common
// folder that holds what snag shares among the repository's worktrees on
// this machine.
const StateFolder = "snag"

// State returns the folder that holds what every worktree of root's
// repository shares on this machine (the daemon's lock, its port, the
// sequences of keys): snag/ in the git common folder, or root's own .snag/
// when root is not in a git repository.
func State(root string) string {
	if c := Common(root); c != "" {
		return filepath.Join(c, StateFolder)
	}
	return filepath.Join(root, ".snag")
}

// Main returns the top folder of the main worktree of the repository whose
// common folder is common (the one git init or clone made), or "" for a
// bare repository, which has none.
func Main(common string) string {
	if filepath.Base(common) == ".git" {
		return filepath.Dir(common)
	}
	return ""
}

// TaskBranch reports whether branch is one that snag made for a task's
// worktree (snag/<key>).
func TaskBranch(branch string) bool {
	rest, ok := strings.CutPrefix(branch, "snag/")
	return ok && rest != ""
}
