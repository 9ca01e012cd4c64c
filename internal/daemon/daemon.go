// Package daemon is snagd: the one process per repository that watches the
// task files of each of its worktrees, keeps their indexes live, makes
// every write, holds the leases of connected agents, and serves the HTTP
// API on 127.0.0.1. Each worktree is served through a view of its own
// (host.go), chosen by the worktree a request names; the views share one
// engine.Repository, so a task is leased in one worktree at a time and a
// key is minted once. Asked to (Options.Hosted), it also serves /mcp alone
// on a second listener, over TLS with a token of its own, to agents on
// other machines (hosted.go).
//
// Run wires the parts together under one errgroup: each view's watcher
// batches feed its index, the HTTP server answers the CLI, the MCP bridge
// and the board, and a sweep releases the leases of agents that are gone.
// One failure stops them all, cleanly: in-flight writes finish, the
// indexes are closed and each .snag/.port is removed.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/token"
	"github.com/snagdev/snag/internal/watch"
	"github.com/snagdev/snag/internal/workspace"
)

// The ports snagd tries, in order, when none is given.
const (
	FirstPort = 7654
	LastPort  = 7664
)

// LockFile, in .snag/, is held by the running snagd; it names its pid and port.
const LockFile = "snagd.lock"

// The defaults of [Options.Settle], [Options.Grace] and [Options.Sweep]:
// the engine's. Tests that prove something does not happen wait for these,
// so a changed default changes their wait with it.
const (
	DefaultSettle = engine.DefaultSettle
	DefaultGrace  = engine.DefaultGrace
	// DefaultHandleIdle is Options.HandleIdle's default (30 min).
	DefaultHandleIdle = engine.DefaultHandleIdle
	DefaultSweep      = engine.DefaultSweep
)

// Options configure a daemon.
type Options struct {
	Root    string       // the project root, the folder that holds .snag/
	Port    int          // 0: the first free port in FirstPort..LastPort
	Home    string       // the per-user folder with the token; "" for project.Home()
	Version string       // reported by /health
	Log     *slog.Logger // nil: discard
	// Watch tunes the watcher (tests shorten its timers).
	Watch watch.Options
	// Settle is how long a file that reads as missing or broken is left to
	// settle before snag believes it (editors truncate and rewrite in place;
	// DefaultSettle).
	Settle time.Duration
	// Grace is how long a session whose stream closed (or that has not
	// reconnected after a restart) keeps its leases (3 s).
	Grace time.Duration
	// Sweep is how often the processes of sessions are checked (2 s).
	Sweep time.Duration
	// PlanDelay is how long plan.json waits after a change, gathering more (200 ms).
	PlanDelay time.Duration
	// Ready, when set, is called once the daemon serves requests.
	Ready func(addr string)
	// ExitIdle, when set, stops the daemon once no agent has a session
	// stream open and no request but /health came for that long: a daemon
	// the CLI started in the background does not outlive its use.
	ExitIdle time.Duration
	// MCPIdle is how long an MCP session over HTTP (/mcp) whose client
	// never held a GET stream lives with no request in flight (10 min);
	// then it is closed and its snag session ends after the grace.
	MCPIdle time.Duration
	// MCPStreamGrace is how long an MCP session over HTTP lives with no
	// request in flight once its client's GET stream has closed (30 s, at
	// most MCPIdle): the client is gone.
	MCPStreamGrace time.Duration
	// HandleIdle is how long an agent known only by its handle (MCP
	// 2026-07-28 over /mcp: no connection stands for it) lives with no
	// call that names one of its handles (DefaultHandleIdle); then its
	// session ends and its leases go back to the queue.
	HandleIdle time.Duration
	// Hosted, when set, serves /mcp (and nothing else) on a second
	// listener to agents on other machines: over TLS, to the Host names
	// it allows, with a token of its own. See [Hosted].
	Hosted *Hosted
	// Coord is the PostgreSQL DSN of the coordination store shared with
	// the other clones of the repository; "" looks in $SNAG_COORD and then
	// the repository's file coord (coord.FindDSN: snag team init writes
	// it), and with none there snagd runs alone. It is never logged: only
	// its redacted form is.
	Coord string
	// CoordGrace is how long a clone may stay silent before the others end
	// its sessions and free its tasks (DefaultCoordGrace).
	CoordGrace time.Duration
	// CoordBeat is how often this clone heartbeats (default: a fifth of
	// CoordGrace, at most coord.DefaultHeartbeat).
	CoordBeat time.Duration
}

// DefaultCoordGrace is [Options.CoordGrace]'s default.
const DefaultCoordGrace = coord.DefaultGrace

// Daemon is one worktree's view in a running snagd: the worktree's engine,
// and the routes over it. The host holds the listener and the lock; the
// views of one repository share its engine.Repository.
type Daemon struct {
	// svc is the operations in process: HTTP, /mcp and the board call it.
	svc       *service
	opts      Options
	log       *slog.Logger
	w         *workspace.Workspace // set before opened: read only after it is
	e         *engine.Engine       // w.Engine
	tok       token.Token
	port      int
	guard     *guard
	root      string // absolute, symlinks resolved
	gitCommon string
	host      *host
	// handler is the view's routes behind d.opening; stopView ends its run.
	handler  http.Handler
	stopView context.CancelFunc

	// lastUse is when the last request but /health came, in Unix nanoseconds.
	lastUse atomic.Int64
	// opened is set once the engine is open (and the index rebuilt, when
	// snag.db was damaged); until then every request but /health gets 503.
	opened atomic.Bool
	// failed is why the view could not open, once it could not.
	failed atomic.Pointer[error]

	// mcp serves /mcp; calls holds, by session id, when each session's
	// latest tool call came (since this snagd started).
	mcp   *mcpHTTP
	calls sync.Map
	// held holds, by session id, when the expiry of each agent known by
	// its handle was last written to snag.db (holdAgent); takeMu takes the
	// calls of sessions that name a handle one at a time (admitHandle).
	held   sync.Map
	takeMu sync.Mutex
}

// fail records why the view could not open: its requests are answered
// with it.
func (d *Daemon) failOpen(err error) { d.failed.Store(&err) }

// failure is why the view could not open, or nil.
func (d *Daemon) failure() error {
	if p := d.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Run serves the project at opts.Root, and every other worktree of its
// repository that a request names, until ctx ends. One snagd serves a
// repository: a second one started for any of its worktrees finds the
// repository's lock held and exits, naming the first.
func Run(ctx context.Context, opts Options) error {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	root, err := projectRoot(opts.Root)
	if err != nil {
		return err
	}
	h := newHost(opts, root)
	if err := os.MkdirAll(h.state, 0o755); err != nil {
		return fmt.Errorf("snagd: make %s: %w: check that the repository's git folder can be written", h.state, err)
	}

	what := "this project"
	if h.common != "" {
		what = "this repository's worktrees"
	}
	unlock, err := lock(filepath.Join(h.state, hostLock), what)
	if err != nil {
		return err
	}
	defer unlock()

	h.home = opts.Home
	if h.home == "" {
		h.home = project.Home()
	}
	if h.tok, err = token.Load(h.home); err != nil {
		return fmt.Errorf("snagd: %w", err)
	}
	ln, err := h.startListening()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	h.ctx, h.g = gctx, g
	h.repo = engine.NewRepository()
	// The repository's live state on this machine: every view joins it as
	// a member, unless the repository is in a team (its DSN), whose store
	// the views join instead.
	if h.live, err = coord.OpenEmbeddedDB(ctx, filepath.Join(h.state, coord.EmbeddedFile)); err != nil {
		ln.Close()
		return fmt.Errorf("snagd: %w: check that %s can be written", err, h.state)
	}
	defer h.live.Close()
	root = h.servedRoot(root)
	h.mu.Lock()
	h.openLocked(root) // the primary
	h.mu.Unlock()
	primary := h.primary

	h.openKnown()
	// The board and the hosted /mcp are the default view's: the main
	// worktree's when it has a project, else the primary's.
	def := h.defaultView()
	hosted, hostedLn, err := openHosted(ctx, def, opts.Hosted, h.tok)
	if err != nil {
		ln.Close()
		cancel()
		g.Wait()
		return fmt.Errorf("snagd: %w", err)
	}

	h.serve(gctx, g, ln)
	if hosted != nil {
		// The same /mcp as the local listener's (the default view's routes
		// made it), behind the hosted gate: its sessions are ordinary /mcp
		// sessions.
		hosted.secret.onChange = func(old token.Token) {
			def.mcp.closeHosted()
			def.revokeHandles(hostedCred(old))
		}
		if tok := hosted.secret.current(); !zero(tok) {
			go def.revokeStale(gctx, "hosted:", hostedCred(tok))
		}
		hsrv := hosted.server(def.opening(def.mcp))
		serveIn(gctx, g, hsrv, func() error { return hosted.serve(hsrv, hostedLn) })
	}
	g.Go(func() error { return reachable(gctx, ln.Addr().String()) })
	g.Go(func() error { return h.lifetime(gctx) })
	h.logServing(root, ln, hosted, hostedLn, def)
	if opts.Ready != nil {
		go whenReady(gctx, primary, func() { opts.Ready(ln.Addr().String()) })
	}
	if err = g.Wait(); errors.Is(err, errDone) {
		err = nil
	}
	return err
}

// projectRoot is dir made absolute with its symlinks resolved, once it
// is known to hold a .snag/ folder.
func projectRoot(dir string) (string, error) {
	root, err := filepath.Abs(dir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return "", fmt.Errorf("snagd: root %s: %w", dir, err)
	}
	if fi, err := os.Stat(filepath.Join(root, project.Folder)); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("snagd: %s has no .snag/ folder: run snag init there first", root)
	}
	return root, nil
}

// newHost is the host of the repository root is in, with no view yet:
// where its git common and state folders are, and where root is below
// its worktree's top.
func newHost(opts Options, root string) *host {
	h := &host{opts: opts, log: opts.Log, views: map[string]*Daemon{}, aliases: map[string]string{}, empty: make(chan struct{})}
	h.common = gitdir.Common(root)
	h.state = gitdir.State(root)
	if top := gitdir.Top(root); h.common != "" && top != "" {
		if real, err := filepath.EvalSymlinks(top); err == nil {
			top = real
		}
		if rel, err := filepath.Rel(top, root); err == nil {
			h.rel = rel
		}
	}
	return h
}

// startListening listens on the host's port (the first free one when
// none is given) and names it in the repository's lock, then arms the
// failpoints.
func (h *host) startListening() (net.Listener, error) {
	ln, err := listen(h.opts.Port)
	if err != nil {
		return nil, err
	}
	h.port = ln.Addr().(*net.TCPAddr).Port
	writeLock(filepath.Join(h.state, hostLock), h.port, h.opts.Version)
	if err := failpoint.Arm(); err != nil {
		ln.Close()
		return nil, fmt.Errorf("snagd: %w", err)
	}
	failpoint.Hit("start", StepListening)
	return ln, nil
}

// servedRoot is the root whose view serves root: the main worktree's for
// a task's worktree, else root itself.
func (h *host) servedRoot(root string) string {
	if main := h.mainRoot(); main != "" && main != root {
		if r, err := h.rootOf(root); err == nil && r == main {
			return main // a task's worktree: the main worktree's view serves it
		}
	}
	return root
}

// openHosted makes the hosted /mcp of def and its listener, when opts
// asks for one; nil for both when it does not.
func openHosted(ctx context.Context, def *Daemon, opts *Hosted, tok token.Token) (*hostedMCP, net.Listener, error) {
	if opts == nil {
		return nil, nil, nil
	}
	hosted, err := newHosted(def, *opts, tok)
	if err != nil {
		return nil, nil, err
	}
	ln, err := hosted.listenOn(ctx)
	if err != nil {
		return nil, nil, err
	}
	return hosted, ln, nil
}

// serve serves the host's routes on ln in g.
//
// The server answers from the start: until a view's index is open and
// its first rescan is done (a damaged snag.db may be rebuilding), every
// request to it but /health gets 503 with Retry-After, never data from
// an index that may not match the files.
func (h *host) serve(ctx context.Context, g *errgroup.Group, ln net.Listener) {
	srv := &http.Server{
		Handler:           failpointOps(h),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
	serveIn(ctx, g, srv, func() error {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
}

// logServing logs where snagd serves, the hosted /mcp's address (warning
// when it is plain HTTP), and a one-time login link to the board.
func (h *host) logServing(root string, ln net.Listener, hosted *hostedMCP, hostedLn net.Listener, def *Daemon) {
	h.log.Info("snagd serving", "root", root, "repository", h.state, "addr", ln.Addr().String(), "pid", os.Getpid())
	if hosted != nil {
		attrs := []any{"addr", hostedLn.Addr().String(), "tls", hosted.tls != nil, "allowed_hosts", hosted.allowedNames()}
		if hosted.tls == nil {
			h.log.Warn("hosted /mcp serving plain HTTP on loopback: put a TLS proxy or an SSH tunnel in front of it for other machines", attrs...)
		} else {
			h.log.Info("hosted /mcp serving", attrs...)
		}
	}
	link, _ := def.guard.board.LoginURL(boardPerson())
	h.log.Info("the board: open this one-time login link (snag open makes another)", "url", link)
}

// whenReady calls ready once the primary view is open and its engine
// ready, unless it fails to open or ctx ends first.
func whenReady(ctx context.Context, primary *Daemon, ready func()) {
	for ctx.Err() == nil && (!primary.opened.Load() || !primary.e.Ready()) {
		if primary.failure() != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ctx.Err() == nil {
		ready()
	}
}

// serveIn serves srv in g (serve is its Serve or ServeTLS), and shuts it
// down once ctx ends, giving requests in flight 5 s.
func serveIn(ctx context.Context, g *errgroup.Group, srv *http.Server, serve func() error) {
	g.Go(serve)
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
}

// listen binds 127.0.0.1 on the given port, or on the first free one of
// FirstPort..LastPort, or, with all of those taken (a machine with many
// repositories served), on any free port: clients find it through the
// lock files and .port, not by probing. It never binds another address.
func listen(port int) (net.Listener, error) {
	if port != 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("snagd: listen on 127.0.0.1:%d: %w (choose another with --port)", port, err)
		}
		return ln, nil
	}
	for p := FirstPort; p <= LastPort; p++ {
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			return ln, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("snagd: every port of 127.0.0.1:%d-%d is taken, and no other could be had: %w (is the loopback interface up? ip link set lo up)", FirstPort, LastPort, err)
	}
	return ln, nil
}

// reachable checks, once, that snagd can connect to its own address, as
// every client will: with the loopback interface down (some sandboxes) a
// port on 127.0.0.1 can be bound but not reached, and a snagd nobody can
// reach would hold the repository's lock while every command waited for
// it. It stops snagd, saying why, when three tries fail.
func reachable(ctx context.Context, addr string) error {
	var err error
	for try := range 3 {
		var c net.Conn
		d := net.Dialer{Timeout: 2 * time.Second}
		if c, err = d.DialContext(ctx, "tcp", addr); err == nil {
			c.Close()
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(try+1) * 100 * time.Millisecond):
		}
	}
	return fmt.Errorf("snagd: cannot reach its own address %s: %w: no command could either (is the loopback interface up? ip link set lo up)", addr, err)
}

// lock takes a daemon lock, the repository's or a worktree's (what names
// which), so a second snagd for the same repository refuses to start and
// names the first.
func lock(path, what string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("snagd: %w", err)
	}
	// Clients test the lock with a shared lock held for an instant
	// (client.LockHeld): a few tries tell that from a daemon holding it.
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	for try := 0; errors.Is(err, syscall.EWOULDBLOCK) && try < 20; try++ {
		time.Sleep(10 * time.Millisecond)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		pid, port := "?", "?"
		if f := strings.Fields(string(b)); len(f) >= 2 {
			pid, port = f[0], f[1]
		}
		return nil, fmt.Errorf("snagd: another snagd already serves %s (pid %s, port %s): use it, or stop it first (snag daemon stop)", what, pid, port)
	}
	return func() {
		f.Truncate(0)
		f.Close()
	}, nil
}

// writeLock names, in a lock file this snagd holds, its pid, its port and
// its version: a client compares the version with its own before it sends
// a request (an older snagd is replaced), without asking /health first.
func writeLock(path string, port int, version string) {
	if version == "" || strings.ContainsAny(version, " \n") {
		version = "unknown"
	}
	os.WriteFile(path, []byte(fmt.Sprintf("%d %d %s\n", os.Getpid(), port, version)), 0o644)
}

// opening answers 503 with Retry-After to every request but /health until
// the project is open, and 500 worktree_failed, saying why, when it could
// not be opened.
func (d *Daemon) opening(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !d.opened.Load() && r.URL.Path != "/health" {
			if err := d.failure(); err != nil {
				writeError(w, &apiError{Status: http.StatusInternalServerError, Code: api.CodeWorktreeFailed, Message: err.Error()})
				return
			}
			writeError(w, &apiError{Status: http.StatusServiceUnavailable, Code: "starting", Message: "snagd is opening its index: try again in a moment"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// retryable reports whether a request failed only because snag.db was
// locked by another process for longer than the request could wait:
// nothing was changed, and the same request may be sent again.
func retryable(err error) bool {
	return index.Busy(err) || errors.Is(err, context.DeadlineExceeded)
}

const busyMessage = "snag.db is locked by another process (a sqlite3 shell or a backup holding a write lock?); nothing was changed: try again in a moment"

// diskFull reports whether a write failed for want of room.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

const diskFullMessage = "the disk that holds the project is full; nothing was changed (the task file keeps its bytes): free some space and try again"

// tokenFileName is the token file in home as messages name it: ~/.snag/token
// for the default home, else its whole path ($SNAG_HOME/token).
func tokenFileName(home string) string {
	if h, err := os.UserHomeDir(); err == nil && filepath.Clean(home) == filepath.Join(h, project.Folder) {
		return "~/" + project.Folder + "/token"
	}
	return filepath.Join(home, "token")
}

// openCoord opens the coordination store when a DSN is given (the
// option, $SNAG_COORD or the repository's file coord in state), joining the
// workspace of the repository's clones as this clone; nil when there is
// none. The per-user file of older versions (home/coord) is no longer
// read: it made every project of the user join.
func (d *Daemon) openCoord(ctx context.Context, state, home string) (*coord.Store, error) {
	dsn, from, err := coord.FindDSN(d.opts.Coord, state)
	if err != nil {
		return nil, err
	}
	if dsn == "" {
		if p := coord.Legacy(home); p != "" {
			d.log.Warn("a DSN file of an older snag is not read: every project of this user joined the team through it; "+
				"run snag team init in each repository that should join, then remove the file", "file", p)
		}
		return nil, nil
	}
	cfg, err := queue.LoadConfig(filepath.Join(d.root, project.Folder, project.ConfigFile))
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	branch, _, _ := gitdir.Head(d.root)
	ws := gitdir.Workspace(d.root, cfg.Workspace)
	s, err := coord.Open(ctx, dsn, coord.Options{Workspace: ws, Host: host, Root: d.root, Branch: branch,
		Identity: coord.CloneIdentity(state), Version: d.opts.Version, Grace: d.opts.CoordGrace})
	if err != nil {
		return nil, fmt.Errorf("%w (the DSN came from %s)", err, from)
	}
	d.log.Info("team mode: live state shared through the coordination store",
		"store", coord.Redact(dsn), "from", from, "workspace", ws, "clone", s.Clone(), "grace", s.Grace())
	if gs := s.OtherGraces(); len(gs) > 0 {
		d.log.Warn("other clones of this workspace run with a different grace: each is swept by its own, but set --coord-grace alike on every clone",
			"grace", s.Grace(), "others", gs)
	}
	return s, nil
}
