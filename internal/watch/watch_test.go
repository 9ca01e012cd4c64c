package watch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// recorder collects batches from a running watcher.
type recorder struct {
	mu      sync.Mutex
	batches []Batch
	block   func(Batch) // called with mu held, from the watcher's goroutine
	w       *Watcher
	root    string
}

func start(t *testing.T, opts Options) *recorder {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{".snag", ".snag/tasks"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w, err := New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{w: w, root: root}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func(b Batch) {
			r.mu.Lock()
			r.batches = append(r.batches, b)
			if r.block != nil {
				r.block(b)
			}
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	r.waitFor(t, "the start rescan", func(b Batch) bool { return b.Rescan && slices.Contains(b.Reasons, "start") })
	r.reset()
	return r
}

// hold makes the first batch that matches block the watcher's caller: it
// closes busy when the batch arrives, and returns once release is closed.
func (r *recorder) hold(match func(Batch) bool, busy, release chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.block = func(b Batch) {
		if match(b) {
			r.block = nil
			close(busy)
			r.mu.Unlock()
			<-release
			r.mu.Lock()
		}
	}
}

// waitPending waits until name is in the watcher's next batch, gathering,
// or in a batch already sent.
func (r *recorder) waitPending(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.w.mu.Lock()
		ok := r.w.names[name]
		r.w.mu.Unlock()
		if ok || slices.ContainsFunc(r.all(), hasFile(name)) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s is in no batch, sent or gathering", name)
}

// waitWatched waits until the watch on dir is on the folder now there: a
// change made in it from then on makes an event.
func (r *recorder) waitWatched(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		now, err := os.Lstat(dir)
		r.w.watchedMu.Lock()
		was := r.w.watched[dir]
		r.w.watchedMu.Unlock()
		if err == nil && was != nil && os.SameFile(now, was) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the watch on %s is not on the folder there now", dir)
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.batches = nil
	r.mu.Unlock()
}

func (r *recorder) all() []Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// waitFor polls until a batch matches, or fails after a generous deadline.
func (r *recorder) waitFor(t *testing.T, what string, match func(Batch) bool) Batch {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, b := range r.all() {
			if match(b) {
				return b
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no batch with %s; got %+v", what, r.all())
	return Batch{}
}

func (r *recorder) tasks(name string) string { return filepath.Join(r.root, ".snag", "tasks", name) }

func hasFile(name string) func(Batch) bool {
	return func(b Batch) bool { return slices.Contains(b.Files, name) }
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWriteMakesABatch(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	write(t, r.tasks("SNAG-1 - a.md"), "---\n")
	b := r.waitFor(t, "SNAG-1", hasFile("SNAG-1 - a.md"))
	if b.Rescan {
		t.Errorf("a single write asked for a rescan: %+v", b)
	}
}

func TestEditorDroppingsNeverMakeABatch(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	for _, name := range []string{".SNAG-1 - a.md.swp", "4913", "SNAG-1 - a.md~", "#SNAG-1 - a.md#",
		"SNAG-1 - a.md___jb_tmp___", "SNAG-1 - a.md___jb_old___", ".SNAG-1 - a.md.0a1b2c.snag-tmp", "notes.txt"} {
		write(t, r.tasks(name), "x")
	}
	os.Symlink("user@host.1234", r.tasks(".#SNAG-1 - a.md")) // emacs lock: a dangling link
	write(t, r.tasks("SNAG-2 - b.md"), "---\n")              // a real change, to know when the rest arrived
	r.waitFor(t, "SNAG-2", hasFile("SNAG-2 - b.md"))
	for _, b := range r.all() {
		for _, f := range b.Files {
			if f != "SNAG-2 - b.md" {
				t.Errorf("a dropping made a batch: %q", f)
			}
		}
	}
}

// TestW5_ChmodAndTouchAreIgnored: attribute changes never make a batch.
func TestW5_ChmodAndTouchAreIgnored(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	p := r.tasks("SNAG-1 - a.md")
	write(t, p, "---\n")
	r.waitFor(t, "SNAG-1", hasFile("SNAG-1 - a.md"))
	r.reset()
	for i := range 1000 {
		os.Chmod(p, 0o600+os.FileMode(i%2)*0o40)
		now := time.Now()
		os.Chtimes(p, now, now)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	write(t, r.tasks("SNAG-2 - b.md"), "---\n")
	r.waitFor(t, "SNAG-2", hasFile("SNAG-2 - b.md"))
	for _, b := range r.all() {
		if slices.Contains(b.Files, "SNAG-1 - a.md") {
			t.Fatalf("chmod/touch/open made a batch: %+v", b)
		}
	}
}

// TestManyEventsCoalesce: 200 quick writes of one file come as one batch
// naming it once. Within the quiet time no batch is sent however many
// events come (the quiet time is made longer than any test, so no pause of
// a loaded machine can end it early); and writes made while the caller is
// busy with a batch, all taken in before it returns, are the next batch.
func TestManyEventsCoalesce(t *testing.T) {
	t.Parallel()
	writes := func(r *recorder) {
		for i := range 200 {
			write(t, r.tasks("SNAG-1 - a.md"), strings.Repeat("x", i))
		}
		write(t, r.tasks("SNAG-2 - last.md"), "---\n") // its event comes after every one of the writes'
		r.waitPending(t, "SNAG-2 - last.md")
	}
	t.Run("within the quiet time", func(t *testing.T) {
		r := start(t, Options{Quiet: time.Hour, MaxDelay: time.Hour})
		writes(r)
		if bs := r.all(); len(bs) > 0 {
			t.Errorf("batches sent within the quiet time: %+v; want none until it passes", bs)
		}
	})
	t.Run("while the caller is busy", func(t *testing.T) {
		r := start(t, Options{})
		busy, release := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		r.hold(func(b Batch) bool { return slices.Contains(b.Files, "SNAG-0 - busy.md") }, busy, release)
		write(t, r.tasks("SNAG-0 - busy.md"), "---\n")
		<-busy
		writes(r)
		close(release)
		r.waitFor(t, "the writes", hasFile("SNAG-2 - last.md"))
		n := 0
		for _, b := range r.all() {
			if slices.Contains(b.Files, "SNAG-1 - a.md") {
				n++
				if !slices.Equal(b.Files, []string{"SNAG-1 - a.md", "SNAG-2 - last.md"}) {
					t.Errorf("the batch of the writes: %+v; want SNAG-1 and SNAG-2 once each", b)
				}
			}
		}
		if n != 1 {
			t.Errorf("200 quick writes made %d batches; want them coalesced into one", n)
		}
	})
}

// TestW8_TasksFolderReplaced: tasks/ removed and recreated, or swapped by
// two renames, asks for a rescan, and the next single edit is still seen.
func TestW8_TasksFolderReplaced(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"remove", "swap"} {
		t.Run(how, func(t *testing.T) {
			r := start(t, Options{})
			tasks := filepath.Join(r.root, ".snag", "tasks")
			switch how {
			case "remove":
				if err := os.RemoveAll(tasks); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(tasks, 0o755); err != nil {
					t.Fatal(err)
				}
			case "swap":
				next := filepath.Join(r.root, ".snag", "tasks.new")
				os.Mkdir(next, 0o755)
				write(t, filepath.Join(next, "SNAG-5 - e.md"), "---\n")
				if err := os.Rename(tasks, filepath.Join(r.root, ".snag", "tasks.old")); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(next, tasks); err != nil {
					t.Fatal(err)
				}
			}
			r.waitFor(t, "a rescan", func(b Batch) bool { return b.Rescan && slices.Contains(b.Reasons, "tasks replaced") })
			r.waitWatched(t, tasks)
			write(t, r.tasks("SNAG-9 - after.md"), "---\n")
			r.waitFor(t, "the edit after the swap", hasFile("SNAG-9 - after.md"))
		})
	}
}

// TestW10_OverflowAsksForOneRescan injects the overflow error fsnotify
// reports when the kernel queue fills, five times in a burst: they ask for
// one rescan. The burst is made while the caller is busy with a batch, so
// no pause of a loaded machine can split it across two.
func TestW10_OverflowAsksForOneRescan(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	busy, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	r.hold(func(b Batch) bool { return slices.Contains(b.Files, "SNAG-0 - busy.md") }, busy, release)
	write(t, r.tasks("SNAG-0 - busy.md"), "---\n")
	<-busy
	for range 5 {
		r.w.fs.Errors <- fsnotify.ErrEventOverflow
	}
	write(t, r.tasks("SNAG-2 - last.md"), "---\n") // its event comes after the overflows'
	r.waitPending(t, "SNAG-2 - last.md")
	close(release)
	b := r.waitFor(t, "an overflow rescan", func(b Batch) bool { return b.Rescan && slices.Contains(b.Reasons, "overflow") })
	if len(b.Reasons) != 1 {
		t.Errorf("reasons %q; want overflow once", b.Reasons)
	}
	n := 0
	for _, b := range r.all() {
		if b.Rescan {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d rescans for five overflows in a burst; want one", n)
	}
}

// TestW11_PollingWhenNoWatches: in polling mode, batches still come.
func TestW11_PollingWhenNoWatches(t *testing.T) {
	t.Parallel()
	r := start(t, Options{ForcePoll: true, Poll: 50 * time.Millisecond})
	if !r.w.Polling() {
		t.Fatal("Polling() = false with ForcePoll")
	}
	r.waitFor(t, "a poll rescan", func(b Batch) bool { return b.Rescan && slices.Contains(b.Reasons, "poll") })
}

func TestConfigChange(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	write(t, filepath.Join(r.root, ".snag", "config.json"), `{"version": 1}`)
	r.waitFor(t, "config", func(b Batch) bool { return b.Config })
}

// TestPlanRemoved: a plan.json someone removes is asked for again.
func TestPlanRemoved(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	plan := filepath.Join(r.root, ".snag", "plan.json")
	write(t, plan+".tmp", `{"version": 1}`)
	if err := os.Rename(plan+".tmp", plan); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(plan); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "plan.json gone", func(b Batch) bool { return b.PlanGone })
}

func TestPeriodicRescan(t *testing.T) {
	t.Parallel()
	r := start(t, Options{Rescan: 100 * time.Millisecond})
	r.waitFor(t, "a timer rescan", func(b Batch) bool { return b.Rescan && slices.Contains(b.Reasons, "timer") })
}

// TestRescanPeriodFromTheEnvironment: SNAG_RESCAN sets the period when the
// options leave it zero, as tests of a real snagd process do.
func TestRescanPeriodFromTheEnvironment(t *testing.T) {
	t.Setenv(RescanEnv, "100ms")
	r := start(t, Options{})
	r.waitFor(t, "a timer rescan", func(b Batch) bool { return b.Rescan && slices.Contains(b.Reasons, "timer") })
}

// TestIndexRemoved: a snag.db someone moves away (or removes) is said.
func TestIndexRemoved(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	db := filepath.Join(r.root, ".snag", "snag.db")
	write(t, db+".tmp", "a new index")
	if err := os.Rename(db+".tmp", db); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(db, db+".aside"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "snag.db gone", func(b Batch) bool { return b.IndexGone })
}
