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
	"github.com/snagdev/snag/project"
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
	// settle before snag believes it (editors truncate and rewrite in place).
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

	settleMu sync.Mutex
	settling map[string]*time.Timer

	streams *streams

	planMu      sync.Mutex
	planTimer   *time.Timer
	planStopped bool
}

// Run serves the project until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Settle <= 0 {
		opts.Settle = 300 * time.Millisecond
	}
	if opts.Grace <= 0 {
		opts.Grace = 3 * time.Second
	}
	if opts.Sweep <= 0 {
		opts.Sweep = 2 * time.Second
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
	d.guard = &guard{tok: d.tok, port: d.port}
	writeLock(filepath.Join(root, project.Folder, LockFile), d.port)

	if d.p, err = project.Open(ctx, root); err != nil {
		ln.Close()
		return fmt.Errorf("snagd: %w", err)
	}
	defer d.p.Close()
	if n, err := d.p.Tasks.SweepTemps(time.Minute); err == nil && n > 0 {
		d.log.Info("swept temp files", "count", n)
	}

	portFile := filepath.Join(root, project.Folder, project.PortFile)
	if err := os.WriteFile(portFile, []byte(strconv.Itoa(d.port)+"\n"), 0o644); err != nil {
		ln.Close()
		return fmt.Errorf("snagd: write %s: %w", portFile, err)
	}
	defer os.Remove(portFile)

	w, err := watch.New(root, opts.Watch)
	if err != nil {
		ln.Close()
		return fmt.Errorf("snagd: %w", err)
	}

	srv := &http.Server{
		Handler:           d.routes(ctx),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
	}
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
	g.Go(func() error {
		return w.Run(gctx, func(b watch.Batch) { d.apply(gctx, b, w.Polling()) })
	})
	g.Go(func() error {
		for !d.ready.Load() {
			select {
			case <-gctx.Done():
				return nil
			case <-time.After(5 * time.Millisecond):
			}
		}
		return d.sweep(gctx)
	})
	d.log.Info("snagd serving", "root", root, "addr", ln.Addr().String(), "pid", os.Getpid())
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
	err = g.Wait()
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
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		pid, port, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if pid == "" {
			pid = "?"
		}
		return nil, fmt.Errorf("snagd: another snagd already serves this project (pid %s, port %s): use it, or stop it first", pid, port)
	}
	return func() {
		f.Truncate(0)
		f.Close()
	}, nil
}

func writeLock(path string, port int) {
	os.WriteFile(path, []byte(fmt.Sprintf("%d %d\n", os.Getpid(), port)), 0o644)
}
