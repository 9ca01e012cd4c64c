package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/token"
	"github.com/snagdev/snag/internal/workspace"
)

// host is one snagd: it holds its repository's lock, its listener and the
// token, and serves every worktree of the repository through a view of its
// own (a Daemon: that worktree's engine, over its files and its index, and
// its routes). A request names its worktree (api.WorktreeHeader); one
// without is for the main worktree's view. The views share one
// engine.Repository, so a task is leased in one worktree at a time and a
// key is minted once in the whole repository.
//
// Outside git a folder is its own repository: its one view is its own.
type host struct {
	opts   Options
	log    *slog.Logger
	home   string
	tok    token.Token
	port   int
	common string // the git common folder; "" outside git
	state  string // gitdir.State: the repository's lock, its sequences
	// top and rel place a project in the worktrees: rel is the project
	// root's folder below its worktree's top (the same in every worktree).
	rel  string
	repo *engine.Repository

	ctx context.Context // the serving group's: views run under it
	g   *errgroup.Group

	mu        sync.Mutex
	views     map[string]*Daemon // by project root
	aliases   map[string]string  // a path a request named -> the root whose view serves it
	primary   *Daemon            // the view of --root (or the main worktree's, for a task worktree)
	empty     chan struct{}      // closed when the last view has closed
	emptyOnce sync.Once

	// live is the repository's embedded live state, which every view
	// joins as a member when the repository is not in a team.
	live *coord.EmbeddedDB

	trimMu sync.Mutex
	trim   *time.Timer // trimSoon's

	// idleChecks counts the lifetime loop's checks of idleness
	// (api.Progress.IdleChecks).
	idleChecks atomic.Int64
}

// trimAfter is how long after the last view opened snagd gives the memory
// the openings used back to the system (trimSoon).
const trimAfter = time.Second

// trimSoon gives the memory that opening views took (an index built from
// the files, each a burst of garbage) back to the system once no view
// has opened for trimAfter. Go's scavenger would return it over minutes;
// a snagd serving many worktrees is asked for its resident memory at
// once, and its live heap is a few megabytes.
func (h *host) trimSoon() {
	h.trimMu.Lock()
	defer h.trimMu.Unlock()
	if h.trim != nil {
		h.trim.Reset(trimAfter)
		return
	}
	h.trim = time.AfterFunc(trimAfter, debug.FreeOSMemory)
}

// secondaryConns is how many connections to snag.db the view of a
// worktree other than the main one keeps: the writer's and one for reads
// (an agent or two there; a read takes milliseconds). Each connection
// costs about 0.4 MB, times every worktree served: with three, 14
// worktrees took 65 MB, with two 59 MB (BenchmarkR1_Worktrees).
const secondaryConns = 2

// hostLock is the name of the repository's lock file in its state folder:
// the same file as a project's .snag/snagd.lock outside git.
const hostLock = LockFile

// viewFor gives the view that serves the project root a request names,
// opening it on first use; the default view (the main worktree's, else the
// primary) when it names none. err is an answer for the caller: the folder
// is not a worktree of this repository, or has no .snag/.
func (h *host) viewFor(r *http.Request) (v *Daemon, asked string, err *apiError) {
	raw := r.Header.Get(api.WorktreeHeader)
	if raw == "" {
		return h.defaultView(), "", nil
	}
	path, uerr := url.PathUnescape(raw)
	if uerr != nil || !filepath.IsAbs(path) {
		return nil, "", &apiError{Status: http.StatusBadRequest, Code: api.CodeBadWorktree, Message: api.WorktreeHeader + " must be an absolute path, percent-encoded: " + strconv.Quote(raw)}
	}
	v, verr := h.view(filepath.Clean(path))
	if verr != nil {
		return nil, path, &apiError{Status: http.StatusBadRequest, Code: api.CodeBadWorktree, Message: verr.Error()}
	}
	return v, path, nil
}

// defaultView is the view of a request that names no worktree: the main
// worktree's when it is open, else the primary's, else any.
func (h *host) defaultView() *Daemon {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.mainRoot(); m != "" {
		if v := h.views[m]; v != nil {
			return v
		}
	}
	if h.primary != nil && h.views[h.primary.root] == h.primary {
		return h.primary
	}
	roots := make([]string, 0, len(h.views))
	for root := range h.views {
		roots = append(roots, root)
	}
	if len(roots) == 0 {
		return h.primary
	}
	sort.Strings(roots)
	return h.views[roots[0]]
}

// mainRoot is the project root in the repository's main worktree, or "".
func (h *host) mainRoot() string {
	if h.common == "" {
		return ""
	}
	m := gitdir.Main(h.common)
	if m == "" {
		return ""
	}
	if real, err := filepath.EvalSymlinks(m); err == nil {
		m = real
	}
	return filepath.Join(m, h.rel)
}

// view gives the view of the project at path, opening it when none is
// open. path must hold a .snag/ folder and be in a worktree of this
// repository; a worktree snag made for a task (on a snag/<key> branch) is
// served by the main worktree's view, which holds the queue its task came
// from: its own checkout of the task files is the branch's, and may be
// stale.
func (h *host) view(path string) (*Daemon, error) {
	h.mu.Lock()
	if root, ok := h.aliases[path]; ok {
		if v := h.views[root]; v != nil {
			h.mu.Unlock()
			return v, nil
		}
	}
	h.mu.Unlock()
	root, err := h.rootOf(path)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	v := h.views[root]
	if v == nil {
		v = h.openLocked(root)
	}
	h.aliases[path] = root
	return v, nil
}

// rootOf is the project root whose view serves the project at path, or why
// this snagd cannot serve it.
func (h *host) rootOf(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w: run the command in a project's folder", path, err)
	}
	if fi, err := os.Stat(filepath.Join(real, project.Folder)); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s has no .snag/ folder: run snag init there first", real)
	}
	h.mu.Lock()
	_, open := h.views[real]
	h.mu.Unlock()
	if open {
		return real, nil
	}
	if h.common == "" || gitdir.Common(real) != h.common {
		return "", fmt.Errorf("this snagd (pid %d, port %d) serves %s, not %s: start one for it with snag daemon --root %s",
			os.Getpid(), h.port, h.served(), real, real)
	}
	top := gitdir.Top(real)
	if branch, _, ok := gitdir.Head(top); ok && gitdir.TaskBranch(branch) {
		if m := h.mainRoot(); m != "" && m != real {
			if fi, err := os.Stat(filepath.Join(m, project.Folder)); err == nil && fi.IsDir() {
				return m, nil
			}
		}
	}
	return real, nil
}

// served names what this snagd serves, for messages.
func (h *host) served() string {
	if h.common != "" {
		return "the worktrees of the repository " + h.common
	}
	if h.primary != nil {
		return h.primary.root
	}
	return "another project"
}

// openLocked makes the view of root and starts opening its engine; until
// that is done the view answers 503 starting (and /health not ready). The
// first view made is the primary. h.mu must be held.
func (h *host) openLocked(root string) *Daemon {
	d := &Daemon{opts: h.opts, log: h.log, root: root, tok: h.tok, port: h.port, gitCommon: h.common, host: h}
	if h.primary == nil {
		h.primary = d // the first view, made by Run before any request: set before its run starts
	} else {
		d.log = h.log.With("worktree", root)
	}
	d.guard = &guard{tok: h.tok, port: h.port, tokenFile: tokenFileName(h.home)}
	d.lastUse.Store(time.Now().UnixNano())
	vctx, cancel := context.WithCancel(h.ctx)
	d.stopView = cancel
	d.handler = d.opening(d.routes(vctx))
	h.views[root] = d
	h.aliases[root] = root
	h.repo.Expect(root)
	h.g.Go(func() error { return h.run(vctx, d) })
	return d
}

// run opens the view's engine and serves it until ctx ends, the project's
// folder goes, or the engine fails. A view that ends leaves the host; the
// host stops when its last view has ended. Only the primary view's failure
// to open is the host's error: any other is the answer to its requests.
func (h *host) run(ctx context.Context, d *Daemon) (err error) {
	defer func() {
		d.stopView()
		h.repo.Gone(d.root)
		h.mu.Lock()
		if h.views[d.root] == d {
			delete(h.views, d.root)
			for path, root := range h.aliases {
				if root == d.root {
					delete(h.aliases, path)
				}
			}
		}
		last := len(h.views) == 0
		h.mu.Unlock()
		if last {
			h.closeEmpty()
		}
		if errors.Is(err, errDone) || d != h.primary && err != nil {
			if err != nil && !errors.Is(err, errDone) {
				d.log.Error("a worktree's view stopped", "root", d.root, "err", err)
			}
			err = nil
		}
	}()
	unlock, err := h.lockView(d.root)
	if err != nil {
		d.failOpen(err)
		h.forget(d, 5*time.Second)
		return err
	}
	defer unlock()
	if h.common != "" {
		// git keeps no empty folder: a worktree checked out from a commit
		// with no task yet has .snag/ without tasks/. It gets the folders
		// snag init makes, as the worktree it came from has them.
		if _, err := os.Stat(filepath.Join(d.root, project.Folder, "tasks")); errors.Is(err, fs.ErrNotExist) {
			if _, err := project.Init(d.root); err != nil {
				d.failOpen(err)
				h.forget(d, 5*time.Second)
				return err
			}
		}
	}
	portFile := filepath.Join(d.root, project.Folder, project.PortFile)
	if err := os.WriteFile(portFile, []byte(strconv.Itoa(h.port)+"\n"), 0o644); err != nil {
		err = fmt.Errorf("snagd: write %s: %w", portFile, err)
		d.failOpen(err)
		h.forget(d, 5*time.Second)
		return err
	}
	defer os.Remove(portFile)
	store, err := d.openCoord(ctx, h.state, h.home)
	if err != nil {
		err = fmt.Errorf("snagd: %w", err)
		d.failOpen(err)
		h.forget(d, 5*time.Second)
		return err
	}
	if store != nil {
		defer store.Close()
	}
	// The main worktree's view (or the primary, outside a repository with
	// one) keeps the index's full pool; the other worktrees' views, each
	// an agent's or two, keep fewer connections: about half a megabyte
	// each, times every worktree served.
	conns := index.DefaultConns
	if m := h.mainRoot(); d.root != m && (m != "" || d != h.primary) {
		conns = secondaryConns
	}
	var live coord.Live
	if store != nil {
		live = store // never a nil *Store in the interface: that would be team mode
	} else {
		host, _ := os.Hostname()
		branch, _, _ := gitdir.Head(d.root)
		emb, err := h.live.Join(ctx, coord.Options{Host: host, Root: d.root,
			Branch: branch, Identity: coord.CloneIdentity(h.state), Version: h.opts.Version, Grace: h.opts.CoordGrace})
		if err != nil {
			err = fmt.Errorf("snagd: %w", err)
			d.failOpen(err)
			h.forget(d, 5*time.Second)
			return err
		}
		live = emb
	}
	w, err := workspace.Open(ctx, engine.Options{Root: d.root, Home: h.home, Log: d.log, Watch: h.opts.Watch,
		Settle: h.opts.Settle, Grace: h.opts.Grace, Sweep: h.opts.Sweep, PlanDelay: h.opts.PlanDelay,
		Coord: live, CoordBeat: h.opts.CoordBeat, Repository: h.repo, Conns: conns})
	if err != nil {
		err = fmt.Errorf("snagd: %w", err)
		d.failOpen(err)
		h.forget(d, 5*time.Second)
		return err
	}
	defer w.Close()
	d.w, d.e = w, w.Engine
	e := w.Engine
	if d == h.primary {
		installFailpoints(e.Project())
	}
	d.opened.Store(true)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := w.Run(gctx); err != nil {
			return fmt.Errorf("snagd: %w", err)
		}
		return nil
	})
	g.Go(func() error { return d.lifetime(gctx) })
	g.Go(func() error { d.revokeStale(gctx, "local:", localCred(d.tok)); return nil })
	d.log.Info("snagd serving a worktree", "root", d.root)
	h.trimSoon()
	return g.Wait()
}

// forget keeps a view other than the primary that failed to open for a
// while, so that its requests are answered with why, then lets run drop
// it: the next request opens it again. The primary's failure stops snagd
// at once, as its start's error.
func (h *host) forget(d *Daemon, after time.Duration) {
	if d == h.primary {
		return
	}
	select {
	case <-h.ctx.Done():
	case <-time.After(after):
	}
}

// lockView takes the view's own .snag/snagd.lock, naming this snagd, so
// that a snagd of an older version, which locks a worktree's folder alone,
// cannot serve the same files beside it; outside git it is the host's lock,
// held already.
func (h *host) lockView(root string) (func(), error) {
	path := filepath.Join(root, project.Folder, LockFile)
	if filepath.Join(h.state, hostLock) == path {
		return func() {}, nil
	}
	unlock, err := lock(path, root)
	if err != nil {
		return nil, fmt.Errorf("%w (an older snagd that serves one worktree alone: once it is stopped, this one serves every worktree of the repository)", err)
	}
	writeLock(path, h.port, h.opts.Version)
	return unlock, nil
}

func (h *host) closeEmpty() { h.emptyOnce.Do(func() { close(h.empty) }) }

// openKnown opens, at the start, the view of every worktree of the
// repository whose project has an index already (a snagd served it
// before): its leases must be known before any claim is granted.
func (h *host) openKnown() {
	if h.common == "" {
		return
	}
	roots := []string{h.mainRoot()}
	for _, wt := range gitdir.Worktrees(h.common) {
		if real, err := filepath.EvalSymlinks(wt); err == nil {
			wt = real
		}
		roots = append(roots, filepath.Join(wt, h.rel))
	}
	for _, root := range roots {
		if root == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, project.Folder, project.DBFile)); err != nil && root != h.mainRoot() {
			continue
		}
		if _, err := h.view(root); err != nil {
			continue // not a project (no .snag/ there): nothing to open
		}
	}
}

// served views, for /health and snag daemon status.
func (h *host) roots() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.views))
	for root, v := range h.views {
		if v.opened.Load() {
			out = append(out, root)
		}
	}
	slices.Sort(out)
	return out
}

// idle reports whether every view has been idle for d: no agent's stream
// open and no request but /health.
func (h *host) idle(d time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, v := range h.views {
		if !v.opened.Load() || v.e == nil || !v.e.Ready() || v.w.Sessions.Streams() > 0 || time.Since(time.Unix(0, v.lastUse.Load())) <= d {
			return false
		}
	}
	return true
}

// ServeHTTP hands the request to its worktree's view.
func (h *host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, asked, e := h.viewFor(r)
	if e != nil {
		if r.URL.Path == "/health" {
			// Whoever asks is told whom this snagd serves; it is not theirs.
			h.defaultView().health(w, r)
			return
		}
		writeError(w, e)
		return
	}
	if r.URL.Path == LoginCodesPath {
		// The board is the default view's (a browser names no worktree):
		// its login links are minted there, whoever asks for one.
		v = h.defaultView()
	}
	if asked != "" {
		r = r.WithContext(context.WithValue(r.Context(), askedKey{}, asked))
	}
	v.handler.ServeHTTP(w, r)
}

// askedKey keys, in a request's context, the project root its
// X-Snag-Worktree named.
type askedKey struct{}
