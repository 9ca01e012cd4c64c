// Package watch turns filesystem events under a project's .snag/ folder
// into batches of task files that may have changed, for snagd to re-read.
//
// fsnotify gives hints, not truth: events are dropped when the kernel queue
// overflows, watches are lost when a folder is replaced, and a git checkout
// can bring thousands at once. So a [Watcher] only ever says "look at these
// names" or "rescan everything"; the daemon reads the files, hashes them and
// decides. A full rescan is asked for on overflow, on any watcher error,
// when tasks/ or .snag/ is replaced, and on a timer. When no watches can be
// had (ENOSPC, EMFILE) the watcher falls back to polling: a rescan every
// poll interval, and [Watcher.Polling] says so.
//
// Editor droppings (vim's .swp and 4913, emacs's #autosave# and .#lock,
// ~ backups, JetBrains ___jb_ files, snag's own temp files) and chmod-only
// events never make a batch.
//
// The periodic rescan runs every 60 s unless [Options] say otherwise or
// the environment variable SNAG_RESCAN holds a Go duration ("2s"): tests
// of a real snagd process shorten it so, and a project on a filesystem
// that drops events (some network and container mounts) may too.
//
// watch knows nothing of the index: the daemon connects the two.
package watch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/snagdev/snag/internal/queue"
)

// configName is the project settings file in .snag/.
const configName = "config.json"

// planName is the queue as a file, in .snag/.
const planName = "plan.json"

// indexName is the index, in .snag/.
const indexName = "snag.db"

// RescanEnv names the environment variable that, holding a Go duration,
// sets the period of the full rescan when [Options.Rescan] is zero.
const RescanEnv = "SNAG_RESCAN"

// Options tune a Watcher. Zero values take the defaults.
type Options struct {
	Quiet    time.Duration // a batch is sent once no event came for this long (50 ms)
	MaxDelay time.Duration // ... or this long after its first event at the latest (1 s)
	Rescan   time.Duration // a full rescan this often regardless (60 s, or $SNAG_RESCAN)
	Poll     time.Duration // rescan interval in polling mode (1 s)
	// ForcePoll starts in polling mode, as if no watch could be had.
	ForcePoll bool
}

func (o Options) withDefaults() Options {
	if o.Quiet <= 0 {
		o.Quiet = 50 * time.Millisecond
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = time.Second
	}
	if o.Rescan <= 0 {
		o.Rescan = 60 * time.Second
		if d, err := time.ParseDuration(strings.TrimSpace(os.Getenv(RescanEnv))); err == nil && d > 0 {
			o.Rescan = max(d, 100*time.Millisecond)
		}
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return o
}

// Batch is what changed since the last batch.
type Batch struct {
	// Files are names in tasks/ that were created, written, removed or
	// renamed, sorted. A name may be listed and yet be unchanged.
	Files []string
	// Rescan asks for a full rescan of tasks/; Reasons says why.
	Rescan  bool
	Reasons []string
	// Config is set when .snag/config.json changed.
	Config bool
	// PlanGone is set when .snag/plan.json was removed or moved away, so
	// it is written again.
	PlanGone bool
	// Notes is set when a note in .snag/notes/ (or the folder) changed.
	Notes bool
	// IndexGone is set when .snag/snag.db was removed or moved away: only
	// a person or another program does that.
	IndexGone bool
}

// Empty reports whether the batch asks for nothing.
func (b Batch) Empty() bool {
	return len(b.Files) == 0 && !b.Rescan && !b.Config && !b.PlanGone && !b.Notes && !b.IndexGone
}

// Watcher watches one project's .snag/ folder. Create it with [New], then
// call [Watcher.Run] once.
type Watcher struct {
	root, snag, tasks string
	notes             string // .snag/notes: the decision graph's notes
	opts              Options

	fs *fsnotify.Watcher // nil in polling mode

	// The pump goroutine adds to pending under mu and pokes wake; Run's loop
	// owns everything else (timers, the decision to send), alone.
	mu      sync.Mutex
	pending Batch
	names   map[string]bool
	first   time.Time // when the oldest pending event arrived
	last    time.Time // when the newest did
	wake    chan struct{}
	polling bool

	// watched is the folder each watch of .snag/ and tasks/ was added on,
	// so the timer can tell a replaced folder whose events were missed.
	watchedMu sync.Mutex
	watched   map[string]os.FileInfo
}

// New prepares a watcher for the project whose root folder (the one that
// holds .snag/) is root. It adds the watches at once, so changes made after
// New returns are seen.
func New(root string, opts Options) (*Watcher, error) {
	w := &Watcher{
		root: root, snag: filepath.Join(root, ".snag"), tasks: filepath.Join(root, ".snag", "tasks"),
		notes: filepath.Join(root, ".snag", "notes"),
		opts:  opts.withDefaults(), names: map[string]bool{}, wake: make(chan struct{}, 1),
		watched: map[string]os.FileInfo{},
	}
	if opts.ForcePoll {
		w.polling = true
		return w, nil
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		if noWatches(err) {
			w.polling = true
			return w, nil
		}
		return nil, fmt.Errorf("watch %s: %w", w.snag, err)
	}
	w.fs = fw
	if err := w.addWatches(); err != nil {
		if noWatches(err) {
			fw.Close()
			w.fs, w.polling = nil, true
			return w, nil
		}
		fw.Close()
		return nil, err
	}
	return w, nil
}

// noWatches reports whether err means the system has no watches to give.
func noWatches(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// addWatches watches the root (so a replaced .snag/ is noticed), .snag/ (so
// a replaced tasks/ is noticed, and config.json), tasks/ and notes/.
func (w *Watcher) addWatches() error {
	for _, p := range []string{w.root, w.snag, w.tasks, w.notes} {
		if err := w.fs.Add(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("watch %s: %w", p, err)
		}
		w.noteWatched(p)
	}
	return nil
}

// noteWatched records the folder now at p, on which a watch was just added.
func (w *Watcher) noteWatched(p string) {
	fi, _ := os.Lstat(p)
	w.watchedMu.Lock()
	w.watched[p] = fi
	w.watchedMu.Unlock()
}

// replaced reports whether .snag/ or tasks/ is now another folder than
// the one its watch was added on (or is there now when it was not, or is
// gone): the events that said so were missed.
func (w *Watcher) replaced() bool {
	w.watchedMu.Lock()
	defer w.watchedMu.Unlock()
	for _, p := range []string{w.snag, w.tasks} {
		now, err := os.Lstat(p)
		was := w.watched[p]
		switch {
		case err != nil && was == nil:
		case err != nil || was == nil || !os.SameFile(now, was):
			return true
		}
	}
	return false
}

// Polling reports whether the watcher polls because no watches could be had.
func (w *Watcher) Polling() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polling
}

// Run sends batches to apply until ctx ends, then closes the watcher and
// returns. apply is called from Run's goroutine, one batch at a time; while
// it runs, new events gather into the next batch. The first batch is always
// a rescan, so the caller starts from the files as they are.
func (w *Watcher) Run(ctx context.Context, apply func(Batch)) error {
	var pump sync.WaitGroup
	if w.fs != nil {
		pump.Add(1)
		go func() {
			defer pump.Done()
			w.pump(ctx)
		}()
		defer func() {
			w.fs.Close()
			pump.Wait()
		}()
	}
	apply(Batch{Rescan: true, Reasons: []string{"start"}})

	rescan := time.NewTicker(w.opts.Rescan)
	defer rescan.Stop()
	poll := time.NewTicker(w.opts.Poll)
	defer poll.Stop()
	var timer *time.Timer
	var timerC <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-rescan.C:
			reason := "timer"
			if w.fs != nil && w.replaced() {
				// A folder was replaced and its events were lost (an
				// overflow, a swap between two looks): watch the new one.
				_ = w.readd()
				reason = "tasks replaced"
			}
			w.add(func(b *Batch) { b.Rescan, b.Reasons = true, appendOnce(b.Reasons, reason) })
		case <-poll.C:
			if w.Polling() {
				w.add(func(b *Batch) { b.Rescan, b.Reasons = true, appendOnce(b.Reasons, "poll") })
			}
		case <-w.wake:
		case <-timerC:
		}
		// Decide whether the pending batch is ready: quiet long enough, or
		// held long enough.
		w.mu.Lock()
		has := !w.pending.Empty() || len(w.names) > 0
		now := time.Now()
		wait := time.Duration(0)
		if has {
			wait = min(w.last.Add(w.opts.Quiet).Sub(now), w.first.Add(w.opts.MaxDelay).Sub(now))
		}
		var b Batch
		if has && wait <= 0 {
			b = w.pending
			for n := range w.names {
				b.Files = append(b.Files, n)
			}
			slices.Sort(b.Files)
			w.pending, w.names = Batch{}, map[string]bool{}
		}
		w.mu.Unlock()
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
		switch {
		case has && wait > 0:
			timer = time.NewTimer(wait)
			timerC = timer.C
		case has:
			apply(b)
		}
	}
}

// add changes the pending batch and wakes Run's loop.
func (w *Watcher) add(f func(b *Batch)) {
	w.mu.Lock()
	now := time.Now()
	if w.pending.Empty() && len(w.names) == 0 {
		w.first = now
	}
	w.last = now
	f(&w.pending)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func appendOnce(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// pump only drains fsnotify's channels into the pending batch, so the
// kernel's queue is emptied as fast as it fills however slow apply is.
func (w *Watcher) pump(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			w.event(ev)
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			reason := "watch error: " + err.Error()
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				reason = "overflow"
			}
			w.add(func(b *Batch) { b.Rescan, b.Reasons = true, appendOnce(b.Reasons, reason) })
		}
	}
}

func (w *Watcher) event(ev fsnotify.Event) {
	if ev.Op == fsnotify.Chmod {
		return
	}
	dir, name := filepath.Dir(ev.Name), filepath.Base(ev.Name)
	switch {
	case dir == w.tasks:
		if !queue.IsTaskFileName(name) {
			return
		}
		w.add(func(b *Batch) { w.names[name] = true })
	case dir == w.snag && name == "tasks", dir == w.root && name == ".snag":
		// The folder was created, removed or replaced: its watch is gone or
		// stale. Watch the new one (if it is there yet) and rescan.
		_ = w.readd()
		w.add(func(b *Batch) { b.Rescan, b.Reasons = true, appendOnce(b.Reasons, name+" replaced") })
	case dir == w.notes:
		if strings.HasSuffix(name, ".md") && !strings.HasPrefix(name, ".") {
			w.add(func(b *Batch) { b.Notes = true })
		}
	case dir == w.snag && name == "notes":
		_ = w.readd()
		w.add(func(b *Batch) { b.Notes = true })
	case dir == w.snag && name == configName:
		w.add(func(b *Batch) { b.Config = true })
	case dir == w.snag && name == planName && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0:
		// snag replaces plan.json by renaming a temp file over it, which
		// is a create of plan.json: only someone else removes it.
		w.add(func(b *Batch) { b.PlanGone = true })
	case dir == w.snag && name == indexName && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0:
		// snag writes snag.db in place, or renames a new one over it (a
		// create): a removal is someone else's.
		w.add(func(b *Batch) { b.IndexGone = true })
	}
}

// readd watches .snag/, tasks/ and notes/ again after one of them was
// replaced.
func (w *Watcher) readd() error {
	for _, p := range []string{w.snag, w.tasks, w.notes} {
		_ = w.fs.Remove(p)
		if err := w.fs.Add(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			if noWatches(err) {
				w.mu.Lock()
				w.polling = true
				w.mu.Unlock()
			}
			return err
		}
		w.noteWatched(p)
	}
	return nil
}
