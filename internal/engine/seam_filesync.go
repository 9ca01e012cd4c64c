package engine

import (
	"context"
	"time"

	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/watch"
)

// The seam of the file sync service (internal/engine/filesync), which
// watches the task files, keeps the second looks at files an editor is
// rewriting, and looks again at the saves displaced by snag's writes. What
// a batch, a second look or a displaced save changes in the files and the
// index is a move, made here under the write lock; the service decides
// when. The engine tells the service of a file to settle through the
// Settler the workspace installs (OnSettle), and of a displaced save
// through OnDisplaced.

// ApplyBatch brings the index in step with one batch from the watcher
// (polling says the watcher polls, having no filesystem watches), under
// the write lock, and counts it in [Progress].Batches. The first batch,
// always a full rescan, makes the engine ready (WaitReady).
func (e *Engine) ApplyBatch(ctx context.Context, b watch.Batch, polling bool) {
	e.apply(ctx, b, polling)
	e.progress.batches.Add(1)
}

// Settler keeps the second looks at task files that read as missing or
// broken while their rows are good: an editor truncates and rewrites in
// place, and one read never proves a file gone or broken. The engine calls
// it with the write lock held, so it must not block on the engine; once a
// look is due it calls [Engine.LookAgain]. The file sync service is one.
type Settler interface {
	// Later makes a look at name due once the file has had time to
	// settle, or puts off the one due. due says a look was made due
	// that was not (a new one, or one that had begun).
	Later(name string) (due bool)
	// Settling reports whether a look at name is due.
	Settling(name string) bool
	// Cancel calls off the look at name; calledOff says one was due and
	// had not begun.
	Cancel(name string) (calledOff bool)
	// Names are the files whose looks are due.
	Names() []string
	// Stop calls off every look due, for good, and says how many it
	// called off. The engine calls it as it closes.
	Stop() (calledOff int)
}

// OnSettle installs s as the keeper of second looks. It must be set before
// Run; with none, a file that reads as missing or broken is believed at
// once.
func (e *Engine) OnSettle(s Settler) { e.settler = s }

// LookAgain takes the look at the task file name that [Settler.Later] made
// due: it reads the file once more and indexes what it holds now, under
// the write lock, and counts the look in [Progress].Settles. Once the
// engine is closed it does nothing but count.
func (e *Engine) LookAgain(name string) {
	defer e.progress.settles.Add(1)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if e.syncOne(ctx, name, true) {
		e.writePlan(ctx)
	}
}

// settleLater has the Settler look at name again once it has settled, and
// reports whether it will (false: no Settler, and the file is read now).
func (e *Engine) settleLater(name string) bool {
	if e.settler == nil {
		return false
	}
	if e.settler.Later(name) {
		e.progress.settlesDue.Add(1)
	}
	return true
}

// isSettling reports whether name waits for a second look: it was seen
// missing or broken less than the settle time ago.
func (e *Engine) isSettling(name string) bool {
	return e.settler != nil && e.settler.Settling(name)
}

// cancelSettle calls off the second look at name: it was read whole.
func (e *Engine) cancelSettle(name string) {
	if e.settler != nil && e.settler.Cancel(name) {
		e.progress.settles.Add(1) // called off
	}
}

// settlingNames are the files that wait for a second look.
func (e *Engine) settlingNames() []string {
	if e.settler == nil {
		return nil
	}
	return e.settler.Names()
}

// stopSettling calls off the second looks as the engine closes, and marks
// it closed: a look that begins from here finds nothing to do.
func (e *Engine) stopSettling() {
	if e.settler != nil {
		e.progress.settles.Add(int64(e.settler.Stop())) // called off
	}
	e.closed.Store(true)
}

// OnDisplaced installs f as the taker of the files a rewrite of a task
// file swaps out of place, where a save in place may have landed
// (taskfs.Dir.OnDisplaced): f owns each from then, must end with
// taskfs.Dir.Discard, and must not block (the write lock is held). It must
// be set before Run; with none, a displaced file is removed at once.
func (e *Engine) OnDisplaced(f func(*taskfs.Displaced)) { e.onDisplaced = f }

// displaced hands a file Update swapped out of place to the taker
// OnDisplaced installed.
func (e *Engine) displaced(x *taskfs.Displaced) {
	if e.onDisplaced == nil {
		e.p.Tasks.Discard(x)
		return
	}
	e.onDisplaced(x)
}

// TaskFiles is the folder of task files the engine writes. It stays set
// once the engine is closed.
func (e *Engine) TaskFiles() *taskfs.Dir { return e.tasks }

// A Save is a person's save to keep in the task file Name: Theirs, made on
// Base, merged into what the file holds (a save in place that landed in a
// file a rewrite displaced, or one swapped straight back into place).
type Save struct {
	Name         string
	Base, Theirs []byte
	// From says where the bytes were found, for the log; Merged what the
	// log and the audit say of a merge.
	From, Merged string
	// Done is called, under the write lock, once the bytes are in the
	// file or kept aside in .snag/recovered/ (not when they could be
	// kept neither way).
	Done func()
}

// A MergeOutcome is what [Engine.MergeBack] did: merged, kept aside in
// .snag/recovered/, or nothing, to be tried again as the file kept
// changing under the merge.
type MergeOutcome int

// The outcomes of [Engine.MergeBack].
const (
	MergeAgain MergeOutcome = iota
	Merged
	KeptAside
)

// MergeBack puts the save s back into its task file, merged with what the
// file holds now, under the write lock; or keeps it in .snag/recovered/
// when it cannot be merged, and says so in the log and the audit log. With
// readd (the file has held s's bytes already), only the lines of s the
// file lacks go back in (codec.Readd). When the file keeps changing under
// the merge it does nothing and answers MergeAgain, unless this is the
// last try.
func (e *Engine) MergeBack(s Save, readd, last bool) MergeOutcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.bringBack(ctx, s, readd, last)
}
