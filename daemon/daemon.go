// Package daemon is snagd: the one process per worktree that watches a
// project's task files, keeps its index live, makes every write, holds the
// leases of connected agents, and serves the HTTP API on 127.0.0.1.
//
// Run wires the parts together under one errgroup: the watcher's batches
// feed the index, the HTTP server answers the CLI, the MCP bridge and the
// board, and a sweep releases the leases of agents that are gone. One
// failure stops them all, cleanly: in-flight writes finish, the index is
// closed and .snag/.port is removed.
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

	"github.com/snagdev/snag/gitdir"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/project"
	"github.com/snagdev/snag/queue"
	"github.com/snagdev/snag/token"
	"github.com/snagdev/snag/watch"
)

// The ports snagd tries, in order, when none is given.
const (
	FirstPort = 7654
	LastPort  = 7664
)

// LockFile, in .snag/, is held by the running snagd; it names its pid and port.
const LockFile = "snagd.lock"

// The defaults of [Options.Settle], [Options.Grace] and [Options.Sweep].
// Tests that prove something does not happen wait for these, so a changed
// default changes their wait with it.
const (
	DefaultSettle = 300 * time.Millisecond
	DefaultGrace  = 3 * time.Second
	DefaultSweep  = 2 * time.Second
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
}

// Daemon is a running snagd.
type Daemon struct {
	opts      Options
	log       *slog.Logger
	p         *project.Project
	tok       token.Token
	port      int
	guard     *guard
	hub       *hub
	root      string // absolute, symlinks resolved
	gitCommon string

	// mu serialises every write: snagd is the one writer.
	mu sync.Mutex
	// ready is set once the first full rescan is done; until then every
	// request but /health gets 503.
	ready atomic.Bool
	// lastUse is when the last request but /health came, in Unix nanoseconds.
	lastUse atomic.Int64
	// opened is set once d.p is open (and rebuilt, when snag.db was
	// damaged); until then every request but /health gets 503.
	opened atomic.Bool

	// displacedWG counts the displaced files being looked at again (see
	// displaced.go); displacedOff, set under mu when snagd stops, has new
	// ones removed at once.
	displacedWG  sync.WaitGroup
	displacedOff atomic.Bool

	// tasksGone is set while the last rescan found no tasks/ folder (under mu).
	tasksGone bool

	settleMu sync.Mutex
	settling map[string]*time.Timer

	streams *streams
	// mcp serves /mcp; calls holds, by session id, when each session's
	// latest tool call came (since this snagd started).
	mcp   *mcpHTTP
	calls sync.Map

	// verify runs the checks of resolved tasks in the background; runCtx
	// ends their runs when the daemon stops.
	verify *verifier
	runCtx context.Context
	// cfg is d.p.Config, for readers that do not take mu (a verify dry
	// run, a verifier); apply stores it when config.json changes.
	cfg atomic.Pointer[queue.Config]

	planMu      sync.Mutex
	planTimer   *time.Timer
	planTook    time.Duration // how long the last plan.json write took
	planStopped bool
}

// Run serves the project until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Sweep <= 0 {
		opts.Sweep = DefaultSweep
	}
	if opts.PlanDelay <= 0 {
		opts.PlanDelay = 200 * time.Millisecond
	}
	root, err := filepath.Abs(opts.Root)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return fmt.Errorf("snagd: root %s: %w", opts.Root, err)
	}
	if fi, err := os.Stat(filepath.Join(root, project.Folder)); err != nil || !fi.IsDir() {
		return fmt.Errorf("snagd: %s has no .snag/ folder: run snag init there first", root)
	}
	d := &Daemon{opts: opts, log: opts.Log, hub: newHub(4096), root: root, settling: map[string]*time.Timer{}, streams: newStreams()}
	d.gitCommon = gitdir.Common(root)
	d.lastUse.Store(time.Now().UnixNano())

	unlock, err := lock(filepath.Join(root, project.Folder, LockFile))
	if err != nil {
		return err
	}
	defer unlock()

	home := opts.Home
	if home == "" {
		home = project.Home()
	}
	if d.tok, err = token.Load(home); err != nil {
		return fmt.Errorf("snagd: %w", err)
	}

	ln, err := listen(opts.Port)
	if err != nil {
		return err
	}
	d.port = ln.Addr().(*net.TCPAddr).Port
	d.guard = &guard{tok: d.tok, port: d.port, tokenFile: tokenFileName(home)}
	writeLock(filepath.Join(root, project.Folder, LockFile), d.port)
	if err := failpoint.Arm(); err != nil {
		ln.Close()
		return fmt.Errorf("snagd: %w", err)
	}

	// The server answers from the start: until the index is open and the
	// first rescan is done (a damaged snag.db may be rebuilding), every
	// request but /health gets 503 with Retry-After, never data from an
	// index that may not match the files.
	srv := &http.Server{
		Handler:           failpointOps(d.opening(d.routes(ctx))),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	stop := func(err error) error {
		cancel()
		g.Wait()
		return err
	}

	portFile := filepath.Join(root, project.Folder, project.PortFile)
	if err := os.WriteFile(portFile, []byte(strconv.Itoa(d.port)+"\n"), 0o644); err != nil {
		return stop(fmt.Errorf("snagd: write %s: %w", portFile, err))
	}
	defer os.Remove(portFile)

	if err := d.open(gctx); err != nil {
		return stop(err)
	}
	p := d.p
	defer p.Close()
	p.PlanLater = true // snagd writes plan.json once per burst of changes
	installFailpoints(p)
	d.runCtx = gctx
	p.Tasks.OnDisplaced(d.displaced)
	cfg := p.Config
	d.cfg.Store(&cfg)
	d.verify = newVerifier(cfg.Verify.MaxConcurrent)
	d.opened.Store(true)
	// snagd holds the project's lock and is its one writer: a temp file
	// there now was left by a crash, whatever its age.
	for _, dir := range []*queue.Dir{d.p.Tasks, d.p.Snag} {
		if n, err := dir.SweepTemps(0); err == nil && n > 0 {
			d.log.Info("swept temp files left by a crash", "folder", dir.Path(), "count", n)
		}
	}
	failpoint.Hit("start", stepOpened)

	w, err := watch.New(root, opts.Watch)
	if err != nil {
		return stop(fmt.Errorf("snagd: %w", err))
	}
	g.Go(func() error {
		return w.Run(gctx, func(b watch.Batch) { d.apply(gctx, b, w.Polling()) })
	})
	g.Go(func() error { return d.lifetime(gctx) })
	g.Go(func() error {
		for !d.ready.Load() {
			select {
			case <-gctx.Done():
				return nil
			case <-time.After(5 * time.Millisecond):
			}
		}
		d.resumeVerify(gctx)
		return d.sweep(gctx)
	})
	d.log.Info("snagd serving", "root", root, "addr", ln.Addr().String(), "pid", os.Getpid())
	link, _ := d.guard.board.LoginURL(boardPerson())
	d.log.Info("the board: open this one-time login link (snag open makes another)", "url", link)
	if opts.Ready != nil {
		go func() {
			for !d.ready.Load() && gctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			if gctx.Err() == nil {
				opts.Ready(ln.Addr().String())
			}
		}()
	}
	if err = g.Wait(); errors.Is(err, errDone) {
		err = nil
	}
	if d.verify != nil {
		d.verify.wg.Wait() // their context has ended: commands are killed, browsers closed
	}
	// Displaced files still being looked at are settled now; a write from
	// here on removes its displaced file at once.
	d.mu.Lock()
	d.displacedOff.Store(true)
	d.mu.Unlock()
	d.displacedWG.Wait()
	d.mu.Lock() // let an in-flight write finish before the index closes
	defer d.mu.Unlock()
	d.stopPlan()
	d.stopSettling()
	d.streams.stop()
	return err
}

// listen binds 127.0.0.1 on the given port, or on the first free one of
// FirstPort..LastPort. It never binds another address.
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
	return nil, fmt.Errorf("snagd: every port of 127.0.0.1:%d-%d is taken: stop a snagd you no longer need (snag daemon stop) or choose a port with --port", FirstPort, LastPort)
}

// lock takes the project's daemon lock, so a second snagd for the same root
// refuses to start and names the first.
func lock(path string) (func(), error) {
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
		pid, port, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if pid == "" {
			pid = "?"
		}
		return nil, fmt.Errorf("snagd: another snagd already serves this project (pid %s, port %s): use it, or stop it first (snag daemon stop)", pid, port)
	}
	return func() {
		f.Truncate(0)
		f.Close()
	}, nil
}

func writeLock(path string, port int) {
	os.WriteFile(path, []byte(fmt.Sprintf("%d %d\n", os.Getpid(), port)), 0o644)
}

// opening answers 503 with Retry-After to every request but /health until
// the project is open.
func (d *Daemon) opening(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !d.opened.Load() && r.URL.Path != "/health" {
			writeError(w, &apiError{http.StatusServiceUnavailable, "starting", "snagd is opening its index: try again in a moment"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// open opens the project. A snag.db that is damaged, truncated, of an
// unknown schema or another program's (index.Check at start, or a failed
// open) is moved aside, with its -wal and -shm, and the index is rebuilt
// from the task files: it is a cache of them. The live state it held is
// re-derived from the files too: a claimed task gets a detached lease in
// its assignee's name (the first rescan's reconcile), which the agent
// adopts when it registers again. Epochs and session ids start above any
// the old file can have handed out (index.DB.Fence), so no token from
// before is live again.
func (d *Daemon) open(ctx context.Context) error {
	dbPath := filepath.Join(d.root, project.Folder, project.DBFile)
	damage := index.Check(ctx, dbPath)
	if damage != nil && !errors.Is(damage, index.ErrCorrupt) {
		return fmt.Errorf("snagd: %w", damage)
	}
	var err error
	if damage == nil {
		if d.p, err = project.Open(ctx, d.root); err == nil {
			return nil
		}
		if !errors.Is(err, index.ErrCorrupt) {
			return fmt.Errorf("snagd: %w", err)
		}
		damage = err
	}
	aside, err := moveAside(dbPath)
	if err != nil {
		return fmt.Errorf("snagd: %v; moving it aside failed: %w (move .snag/%s and its -wal and -shm away, then start it again: snag daemon --root %s)", damage, err, project.DBFile, d.root)
	}
	d.log.Warn("snag.db is damaged: moved it aside; rebuilding the index from the task files",
		"problem", damage.Error(), "moved_to", aside)
	if d.p, err = project.Open(ctx, d.root); err != nil {
		return fmt.Errorf("snagd: %w", err)
	}
	failpoint.Hit("start", stepRebuilding)
	st, err := d.p.Rebuild(ctx)
	if err == nil {
		err = d.p.DB.Fence(ctx, time.Now().UnixMilli())
	}
	if err != nil {
		d.p.Close()
		d.p = nil
		return fmt.Errorf("snagd: rebuild the index after moving the damaged one to %s: %w", aside, err)
	}
	failpoint.Hit("start", stepRebuilt)
	d.log.Warn("index rebuilt from the task files; claimed tasks keep detached leases until their agents register again",
		"files", st.Files, "failed", st.Failed, "took", st.Duration, "old_db", aside)
	return nil
}

// moveAside renames a damaged database to snag.db-corrupt-<UTC time>
// (git ignores snag.db-*), its -wal, -shm and -journal beside it under the
// same name, so the set still opens together for a post-mortem. The log
// goes first: a log left behind would be replayed into the new database.
func moveAside(dbPath string) (string, error) {
	stamp := time.Now().UTC().Format("20060102T150405Z")
	aside := dbPath + "-corrupt-" + stamp
	for i := 2; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s-corrupt-%s-%d", dbPath, stamp, i)
	}
	for _, sfx := range []string{"-wal", "-shm", "-journal", ""} {
		err := os.Rename(dbPath+sfx, aside+sfx)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	if f, err := os.Open(filepath.Dir(dbPath)); err == nil {
		f.Sync()
		f.Close()
	}
	return aside, nil
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
