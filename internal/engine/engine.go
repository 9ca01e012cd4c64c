// Package engine is snag's one writer. Every change to a project goes
// through it, under its write lock and its group commit: claims and
// releases under leases, a resolve's moves and a verify outcome's, a
// person's moves and edits, new tasks, the session rows and their ends,
// applying a watcher's batch to the index, the reconcile of leases with
// what the files say, plan.json, and the events that announce each change.
//
// The work beside the writer is services, each a package under
// internal/engine/ with its own state and, where it has background work,
// a Run(ctx): the file sync (the watcher, settling, displaced saves), the
// sessions' streams and sweep, verify's runs, the decision graph, the
// team link, file claims, what agents and people are told (an agent's
// context, the activity, reports), captures and task worktrees. Each
// reaches the engine over a seam it declares (the engine's side is in
// seam_*.go); where the engine tells a service something, it calls a hook
// the service installed through internal/workspace, which opens them
// together. The engine imports none of them.
//
// The engine knows nothing of HTTP. Its methods take a context and plain
// values and return domain values and errors that wrap the sentinels
// below; snagd's operations, its /mcp endpoint and the board are thin
// surfaces over it and its services, in the same process.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/watch"
)

// The defaults of [Options.Settle], [Options.Grace] and [Options.Sweep].
// Tests that prove something does not happen wait for these, so a changed
// default changes their wait with it.
const (
	DefaultSettle = 300 * time.Millisecond
	DefaultGrace  = 3 * time.Second
	DefaultSweep  = 2 * time.Second
)

// Options configure an engine.
type Options struct {
	Root string       // the project root, the folder that holds .snag/
	Home string       // the per-user folder with the approvals; "" for project.Home()
	Log  *slog.Logger // nil: discard
	// Watch tunes the watcher (tests shorten its timers).
	Watch watch.Options
	// Settle is how long a file that reads as missing or broken is left to
	// settle before snag believes it (editors truncate and rewrite in place;
	// DefaultSettle).
	Settle time.Duration
	// Grace is how long a session whose stream closed (or that has not
	// reconnected after a restart) keeps its leases (3 s). The sessions
	// service (internal/engine/sessions) keeps it, as Sweep.
	Grace time.Duration
	// Sweep is how often the processes of sessions are checked (2 s).
	Sweep time.Duration
	// PlanDelay is how long plan.json waits after a change, gathering more (200 ms).
	PlanDelay time.Duration
	// Coord is the live state of the repository, required: the
	// repository's embedded one (coord.EmbeddedDB's Join) when snagd runs
	// alone, the coordination store shared with the other clones on
	// PostgreSQL in team mode. Leases are granted there first, aliases
	// come from its sequences, and its events are passed on.
	Coord coord.Live
	// CoordBeat is how often this clone heartbeats to Coord (default: a
	// fifth of its grace, at most DefaultHeartbeat).
	CoordBeat time.Duration
	// Repository, when set, is shared with the engines of the repository's
	// other worktrees in this snagd: a task is leased in one worktree at a
	// time, and keys come from the repository's sequences.
	Repository *Repository
	// Conns is how many connections to snag.db the engine keeps open
	// (index.DefaultConns when 0): snagd gives the views of worktrees other
	// than the main one fewer, each costing about half a megabyte.
	Conns int
}

// conns is how many connections to snag.db the engine keeps open.
func (e *Engine) conns() int {
	if e.opts.Conns > 0 {
		return e.opts.Conns
	}
	return index.DefaultConns
}

// Engine is the one writer of an open project.
type Engine struct {
	opts      Options
	log       *slog.Logger
	p         *project.Project
	root      string // absolute, symlinks resolved
	gitCommon string
	hub       *Hub
	adopt     func(id int64, expires time.Time) // OnAdopt: the sessions service gives a session from before the start its grace
	live      liveSessions
	notes     notesSync // when the notes index last read its folder
	keyFix    keyFix    // the settling of keys two tasks share (keys.go)
	team      *team     // the live state's side (Options.Coord)
	// tasks is p.Tasks, for the writes that prepare their files with no
	// lock held (commit.go): it stays set when Close lets p go.
	tasks *taskfs.Dir

	// mu serialises every write.
	mu sync.Mutex

	// The group commit (commit.go): batching is set while a batch is
	// being made; waiting are the writes for the next one.
	batchMu  sync.Mutex
	batching bool
	waiting  []*write
	// claiming are the tasks whose claims are under way, with how many
	// are, between their choice and their batch (under claimMu).
	claimMu  sync.Mutex
	claiming map[string]int
	// gaveBack are the tasks each live session released, by session id
	// (under claimMu): its claim-next passes over them while another task
	// is ready, so an agent that gives a task up does not loop on it.
	gaveBack map[int64]map[string]bool
	// ready is set once the first full rescan is done, and readyCh closed
	// then (WaitReady).
	ready   atomic.Bool
	readyCh chan struct{}
	// polling is set while the watcher polls, having no filesystem watches.
	polling atomic.Bool

	// keyFixes counts the background fixes of keys (keys.go), which
	// Close waits for; keyFixesOff, set under mu when the engine stops,
	// starts no new ones.
	keyFixes    sync.WaitGroup
	keyFixesOff atomic.Bool

	// tasksGone is set while the last rescan found no tasks/ folder (under mu).
	tasksGone bool

	// settler keeps the second looks at files an editor is rewriting, and
	// onDisplaced takes the files a rewrite swapped out of place: the file
	// sync service's, installed by the workspace (seam_filesync.go).
	settler     Settler
	onDisplaced func(*taskfs.Displaced)

	// verify is the verify service that runs the checks of resolved tasks
	// (UseVerifier); runCtx ends the background work when the engine stops.
	verify *verifier
	runCtx context.Context
	stop   context.CancelFunc
	// cfg is p.Config, for readers that do not take mu (a verify dry run,
	// a verifier); apply stores it when config.json changes.
	cfg atomic.Pointer[queue.Config]

	// planMu guards the timer and its state, and is held for no longer;
	// planWrite is held for a whole write of plan.json, so two never race
	// to the rename, and a request for the next one (under mu) never
	// waits for the write under way.
	planMu      sync.Mutex
	planTimer   *time.Timer
	planTook    time.Duration // how long the last plan.json write took
	planStopped bool
	planWrite   sync.Mutex

	closeOnce sync.Once
	// closed is set, under mu, once Close has let the project go: a write
	// or a background step that begins from here does nothing. (e.p itself
	// stays set, so a read racing the close gets the closed index's error,
	// not a nil project.)
	closed atomic.Bool

	// progress counts the background work done, for tests (progress.go).
	progress progress
}

// Open opens the project at opts.Root for writing. A snag.db that is
// damaged is moved aside and the index rebuilt from the task files (see
// openProject). The caller must hold the project's daemon lock: the
// engine is its one writer. Run serves it; Close ends it.
func Open(ctx context.Context, opts Options) (*Engine, error) {
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
	if opts.Home == "" {
		opts.Home = project.Home()
	}
	if opts.Coord == nil {
		return nil, errors.New("engine: no live state: Options.Coord is required (join the repository's embedded one, coord.EmbeddedDB's Join, as snagd does)")
	}
	root, err := filepath.Abs(opts.Root)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", opts.Root, err)
	}
	e := &Engine{opts: opts, log: opts.Log, root: root, hub: newHub(4096),
		claiming: map[string]int{}, readyCh: make(chan struct{})}
	e.gitCommon = gitdir.Common(root)
	e.runCtx, e.stop = context.WithCancel(context.Background())
	if err := e.openProject(ctx); err != nil {
		e.stop()
		return nil, err
	}
	e.team = newTeam(opts.Coord, opts.CoordBeat)
	e.p.DB.OnLeasesEnded(e.team.ended)
	e.p.DB.OnAudited(e.team.audited)
	e.p.DB.OnMessage(e.teamMessage)
	if err := e.teamAuditLog(ctx); err != nil {
		e.stop()
		e.p.Close()
		return nil, err
	}
	e.p.Tasks.OnDisplaced(e.displaced)
	e.tasks = e.p.Tasks
	if opts.Repository != nil {
		opts.Repository.join(e)
	}
	cfg := e.p.Config
	e.cfg.Store(&cfg)
	e.verify = newVerifier()
	// The engine is the project's one writer: a temp file there now was
	// left by a crash, whatever its age.
	side := e.p.SideFolders()
	for _, dir := range append([]*taskfs.Dir{e.p.Tasks, e.p.Snag}, side...) {
		if n, err := dir.SweepTemps(0, e.keepLeftover); err == nil && n > 0 {
			e.log.Info("swept temp files left by a crash", "folder", dir.Path(), "count", n)
		}
	}
	for _, d := range side {
		d.Close()
	}
	failpoint.Hit("start", StepOpened)
	return e, nil
}

// The steps of the start and of a verify run that failpoints can name
// (package internal/failpoint).
const (
	StepRebuilding = "rebuilding" // there is no snag.db (a damaged one was moved aside); it is built next
	StepRebuilt    = "rebuilt"    // the built snag.db is in place; it is opened next
	StepOpened     = "opened"     // the index is open; the first rescan is next

	StepVerifyStarted = "started" // op verify: a run was taken by a verifier
	StepVerifyChecked = "checked" // op verify: the verifier answered; the outcome is applied next
)

// Project is the open project, for the hooks crash tests install and for
// the reads of snagd's wiring. Writes go through the engine's methods.
func (e *Engine) Project() *project.Project { return e.p }

// Root is the project root, absolute with symlinks resolved.
func (e *Engine) Root() string { return e.root }

// GitCommon is the git common folder of the root's repository, or "".
func (e *Engine) GitCommon() string { return e.gitCommon }

// Events is the hub that announces every change.
func (e *Engine) Events() *Hub { return e.hub }

// Ready reports whether the first full rescan is done: until then the
// index may not match the files, and nothing should be served from it.
func (e *Engine) Ready() bool {
	// On the repository's embedded live state the first reconcile of the
	// leases is part of starting, as the first rescan is: it reads a local
	// file. (A team's store may be out of reach: its snagd answers meanwhile,
	// and claims say starting.)
	return e.ready.Load() && (e.across() || e.team.started.Load())
}

// WaitReady waits until the first full rescan is done (the index matches
// the files) or ctx ends: the services that run beside the engine start
// their work there.
func (e *Engine) WaitReady(ctx context.Context) error {
	select {
	case <-e.readyCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitServing waits until the engine is Ready or ctx ends: the first full
// rescan done and, on the repository's embedded live state, the first
// reconcile of the leases with it (a team's store may be out of reach, and
// its snagd serves meanwhile).
func (e *Engine) WaitServing(ctx context.Context) error {
	if err := e.WaitReady(ctx); err != nil || e.across() {
		return err
	}
	select {
	case <-e.team.startedCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Config is the project's configuration as snag last read it.
func (e *Engine) Config() queue.Config { return *e.cfg.Load() }

// Close stops the engine: fixes of keys under way finish, an in-flight
// write finishes, a pending plan.json is written, the second looks due
// are called off and the index is closed. The verify service is closed
// before it (its runs cancelled and waited for), and the file sync service
// (its displaced files are settled through the engine).
func (e *Engine) Close() error {
	var err error
	e.closeOnce.Do(func() {
		if e.opts.Repository != nil {
			e.opts.Repository.leave(e) // before its index closes: the others read it
		}
		e.stop()
		e.mu.Lock()
		e.keyFixesOff.Store(true)
		e.mu.Unlock()
		e.keyFixes.Wait()
		e.mu.Lock() // let an in-flight write finish before the index closes
		defer e.mu.Unlock()
		p := e.p
		e.stopPlan()
		e.stopSettling() // and closed from here: a settle timer that fires finds nothing to do
		err = p.Close()
	})
	return err
}

// openProject opens the project. A snag.db that is damaged, truncated, of
// an unknown schema or another program's (index.Check at start, with
// SQLite's quick check unless the file is untouched since a clean close;
// or a failed open) is moved aside, with its -wal and -shm. Where there is
// then no snag.db (that, or a first start) the index is built from the
// task files (project.Build: into a temporary file, renamed into place
// once whole, so a start cut off in the middle leaves no snag.db and the
// next start builds it again): it is a cache of them. The live state a
// damaged file held is re-derived from the files too: a claimed task gets
// a detached lease in its assignee's name (the first rescan's reconcile),
// which the agent adopts when it registers again. Epochs and session ids
// start above any the old file can have handed out (a fence, see
// index.DB.Fence), so no token from before is live again; the fence is
// owed from before the damaged file is moved aside until the new one is
// in place and fenced (a file beside it, snag.db-fence, says so), so a
// start cut off in between fences at the next.
func (e *Engine) openProject(ctx context.Context) error {
	dbPath := filepath.Join(e.root, project.Folder, project.DBFile)
	owedPath := dbPath + fenceOwedSuffix
	_, err := os.Lstat(owedPath)
	owed := err == nil
	// SQLite's quick check reads every page (seconds at 100,000 tasks). A
	// file no one has written since a clean close (its stamps are the ones
	// that close recorded) skips it: nothing can have damaged it since.
	deep, start := !index.Untouched(dbPath), time.Now()
	damage := index.Check(ctx, dbPath, deep)
	e.log.Info("snag.db checked", "quick_check", deep, "untouched_since_clean_stop", !deep, "took", time.Since(start))
	if damage != nil && !errors.Is(damage, index.ErrCorrupt) {
		return damage
	}
	if damage == nil && !missing(dbPath) {
		if e.p, err = project.OpenConns(ctx, e.root, e.conns()); err == nil {
			if owed { // cut off after the build that was owed one was in place
				return e.payFence(ctx, owedPath)
			}
			return nil
		}
		if !errors.Is(err, index.ErrCorrupt) {
			return err
		}
		damage = err
	}
	aside := ""
	if damage != nil {
		if err := touchSynced(owedPath); err != nil {
			return fmt.Errorf("%v; noting that it is being rebuilt failed: %w (make room on the disk, then start it again: snag daemon --root %s)", damage, err, e.root)
		}
		owed = true
		if aside, err = moveAside(dbPath); err != nil {
			return fmt.Errorf("%v; moving it aside failed: %w (move .snag/%s and its -wal and -shm away, then start it again: snag daemon --root %s)", damage, err, project.DBFile, e.root)
		}
		e.log.Warn("snag.db is damaged: moved it aside; rebuilding the index from the task files",
			"problem", damage.Error(), "moved_to", aside)
	}
	failpoint.Hit("start", StepRebuilding)
	opts := index.BuildOptions{OnStep: func(_ context.Context, step string) error { return failpoint.Hit("start", step) }}
	if owed {
		opts.Fence = time.Now().UnixMilli()
	}
	st, err := project.Build(ctx, e.root, opts)
	if err != nil {
		if damage != nil {
			return fmt.Errorf("rebuild the index after moving the damaged one to %s: %w", aside, err)
		}
		return err
	}
	failpoint.Hit("start", StepRebuilt)
	if e.p, err = project.OpenConns(ctx, e.root, e.conns()); err != nil {
		return err
	}
	// plan.json is not written here, before snagd is ready (at 100,000
	// tasks that takes seconds): the start's rescan asks for it, as after
	// any change, and it is written in the background.
	switch {
	case damage != nil:
		e.log.Warn("index rebuilt from the task files; claimed tasks keep detached leases until their agents register again",
			"files", st.Files, "failed", st.Failed, "took", st.Duration, "old_db", aside)
	case owed:
		e.log.Warn("index rebuilt from the task files, after a start cut off while rebuilding it; claimed tasks keep detached leases until their agents register again",
			"files", st.Files, "failed", st.Failed, "took", st.Duration)
	default:
		e.log.Info("index built from the task files: there was no snag.db", "files", st.Files, "failed", st.Failed, "took", st.Duration)
	}
	if owed {
		os.Remove(owedPath) // the build fenced
	}
	return nil
}

// fenceOwedSuffix names the file beside snag.db (snag.db-fence) that says
// a fence is owed: snag.db was found damaged and is being replaced.
const fenceOwedSuffix = "-fence"

// payFence fences the open index and removes the file that said it was
// owed.
func (e *Engine) payFence(ctx context.Context, owedPath string) error {
	if err := e.p.DB.Fence(ctx, time.Now().UnixMilli()); err != nil {
		e.p.Close()
		e.p = nil
		return fmt.Errorf("fence the rebuilt index: %w", err)
	}
	os.Remove(owedPath)
	return nil
}

// touchSynced creates the empty file at path, when it is not there, and
// syncs it and its folder.
func touchSynced(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	return err
}

// missing reports whether there is no database at path to open: no file,
// or an empty one.
func missing(path string) bool {
	fi, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0)
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
	os.Remove(dbPath + index.ClosedSuffix) // of the file moved aside
	if f, err := os.Open(filepath.Dir(dbPath)); err == nil {
		f.Sync()
		f.Close()
	}
	return aside, nil
}

// Audit writes an entry to the audit log; a failure is logged.
func (e *Engine) Audit(ctx context.Context, a snag.AuditEntry) {
	if err := e.p.DB.Audit(ctx, a); err != nil {
		e.log.Warn("audit", "err", err)
	}
}

// AuditCall queues the entry of an agent's tool call, to be written after
// the answer has gone ([index.DB.AuditLater]): with the next write, or
// within index.AuditDelay. The call's own changes are audited in their
// transactions; this line records the call.
func (e *Engine) AuditCall(a snag.AuditEntry) { e.p.DB.AuditLater(a) }
