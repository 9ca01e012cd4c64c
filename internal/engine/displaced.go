package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
)

// A program that opened a task file just before snagd swapped its new
// bytes in (an editor saving in place, a script appending a line) writes
// into the file the swap displaced, which no name reaches any more. So
// taskfs.Dir.Update hands each displaced file to snagd instead of removing
// it, and snagd looks at it again once nothing can write into it: on Linux
// when no process has it open for writing (a read lease is granted),
// elsewhere once it has not changed for displacedQuiet. When it still
// holds the bytes snag edited, it is removed. When a save landed in it,
// snag's edit is made again on the person's bytes: a three-way merge
// (codec.Merge) of the bytes snag edited, the file at the path now and the
// displaced file, written through the one writer like any move, and in
// the audit log; while the file keeps changing under that write (a person
// still saving), it is tried again every displacedEvery for up to
// displacedMerge, a few tries at a time so that other writers are not
// held up. When the two cannot be merged, the file at the path is
// kept and the displaced bytes are saved in .snag/recovered/, and the
// audit log names that file: no one's bytes are dropped. A displaced file
// snagd had not looked at when it died is found by the next start's sweep
// of temp files (taskfs.Leftover), and kept the same way (keepLeftover).
const (
	displacedFirst = 20 * time.Millisecond  // the first look
	displacedEvery = 200 * time.Millisecond // the longest wait between looks
	displacedQuiet = time.Second            // unchanged this long: settled, where leases cannot tell
	displacedMost  = 30 * time.Second       // a file still open for writing after this is taken as it is
	displacedMerge = 10 * time.Minute       // how long a merge is tried again while the file keeps changing
	mergeTries     = 3                      // the tries of one merge, under the write lock
	mergeHold      = 2 * time.Second        // how long a merge is kept in the file against saves made before it
	mergeLook      = 50 * time.Millisecond  // how often the file is looked at meanwhile
)

// displaced takes a file Update swapped out of place. It is called with the
// write lock held, so it only starts the look.
func (e *Engine) displaced(x *taskfs.Displaced) {
	if e.displacedOff.Load() {
		e.p.Tasks.Discard(x)
		return
	}
	e.displacedWG.Add(1)
	go func() {
		defer e.displacedWG.Done()
		e.settleDisplaced(x)
	}()
	if x.Restored != nil {
		e.displacedWG.Add(1)
		go func() {
			defer e.displacedWG.Done()
			e.holdRestored(x)
		}()
	}
}

// A save to keep in a task file: theirs, made on base, merged into what
// the file holds. done is called once its bytes are in the file or kept
// aside; held says the file holds them already. Once it has been in the
// file, a save that takes its lines out again gets back only those lines
// (codec.Readd), not what it held of snag's own scalars: a move of the
// task since then changed those, and rightly.
type keep struct {
	name         string
	base, theirs []byte
	from         string // where the bytes were found, for the log
	merged       string // what the log and audit say of a merge
	held         bool
	done         func()
}

// holdRestored keeps in the file the lines of a save that Update swapped
// straight back into place (taskfs.Displaced.Restored). For an instant the
// file held snag's bytes instead, and a program that read it then (a
// script's read, change and write) saves without the restored save's
// lines. So the restored save is held in the file as a merged displaced
// save is (keepMerged): whenever the file lacks a line it added, it is
// merged in again, on the bytes it was made on.
func (e *Engine) holdRestored(x *taskfs.Displaced) {
	e.keepMerged(keep{name: x.Name, base: x.Seen, theirs: x.Restored, from: "memory (it was swapped back into place)", held: true, done: func() {},
		merged: "a save made from snag's bytes while a save that slipped in before a rewrite was being swapped back lacked that save's lines: they were merged back in"})
}

// settleDisplaced waits until nothing can write into the displaced file,
// then removes it or brings its bytes back.
func (e *Engine) settleDisplaced(x *taskfs.Displaced) {
	dir := e.p.Tasks
	start := time.Now()
	wait := displacedFirst
	var last fs.FileInfo
	var still time.Time
	t := time.NewTimer(wait)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-e.runCtx.Done():
			done = true // stopping: take it as it is
			continue
		case <-t.C:
		}
		writing, known := dir.Writing(x)
		switch {
		case known && !writing:
			done = true
		case !known:
			_, fi, err := dir.ReadDisplaced(x)
			if err != nil {
				done = true
				break
			}
			if last == nil || fi.Size() != last.Size() || !fi.ModTime().Equal(last.ModTime()) {
				last, still = fi, time.Now()
			} else if time.Since(still) >= displacedQuiet {
				done = true
			}
		}
		if time.Since(start) >= displacedMost {
			done = true
		}
		wait = min(2*wait, displacedEvery)
		t.Reset(wait)
	}
	theirs, _, err := dir.ReadDisplaced(x)
	if err != nil || bytes.Equal(theirs, x.Base) {
		dir.Discard(x)
		return
	}
	e.keepMerged(keep{name: x.Name, base: x.Base, theirs: theirs, from: x.Temp, done: func() { dir.Discard(x) },
		merged: "a save in place landed in the file snag had just replaced: snag's change was made again on the saved bytes"})
}

// keepMerged merges the displaced bytes theirs into the file and keeps
// them there. A file the person keeps saving is merged into once they
// pause: the merge is tried again rather than its bytes kept aside. And
// as the displaced bytes were out of sight until the merge landed, a save
// made from a read just before it (an editor's or a script's read, change
// and write) lacks their lines and takes them out again: the merge is
// held until the file has kept every line they added for mergeHold, and
// made again whenever it lacks one. After displacedMerge of this, or when
// snagd stops, a last try merges or keeps the bytes aside.
func (e *Engine) keepMerged(k keep) {
	var held time.Time // since when the file has held the merge; zero when it does not
	if k.held {
		held = time.Now()
	}
	readd := k.held // the file has held theirs
	for since := time.Now(); ; {
		stopping := e.runCtx.Err() != nil
		wait := mergeLook
		if cur, _, err := e.p.Tasks.Read(k.name); err == nil && !held.IsZero() && !codec.Lacks(cur, k.base, k.theirs) {
			if stopping || time.Since(held) >= mergeHold {
				return
			}
		} else {
			held = time.Time{}
			switch e.mergeBack(k, readd, stopping || time.Since(since) >= displacedMerge) {
			case merged:
				held, readd = time.Now(), true
			case keptAside:
				return
			case mergeAgain:
				wait = displacedEvery
			}
		}
		select {
		case <-e.runCtx.Done():
		case <-time.After(wait):
		}
	}
}

// A merge's outcome: made, kept aside in .snag/recovered/, or to be tried
// again as the file kept changing.
type mergeOutcome int

const (
	mergeAgain mergeOutcome = iota
	merged
	keptAside
)

// mergeBack is bringBack under the write lock.
func (e *Engine) mergeBack(k keep, readd, last bool) mergeOutcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.bringBack(ctx, k, readd, last)
}

// bringBack puts a save that landed in a displaced file (or was swapped
// back into place) back into the task file, merged with what the file
// holds now, or keeps it in .snag/recovered/ when it cannot be merged, and
// then calls k.done (unless its bytes could not be kept aside either). It
// holds the write lock. When the file keeps changing under the merge it
// does nothing and reports mergeAgain, unless this is the last try: the
// caller tries again in a moment. With readd, only the lines of theirs the
// file lacks go back in (codec.Readd).
func (e *Engine) bringBack(ctx context.Context, k keep, readd, last bool) mergeOutcome {
	p := path.Join(index.TasksFolder, k.name)
	theirs := k.theirs
	id := ""
	for _, b := range [][]byte{theirs, k.base} {
		if t, err := codec.Parse(b); err == nil {
			id = t.ID
			break
		}
	}
	var mergeErr error
	err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := e.p.Tasks.RewriteWithin(k.name, func(cur []byte) ([]byte, error) {
			if _, err := codec.Parse(cur); err != nil {
				// Caught mid-save (an editor writing in place truncates
				// first), or left broken for now: merged into later.
				return nil, fmt.Errorf("%w: %w", taskfs.ErrChanged, err)
			}
			merge := codec.Merge
			if readd {
				merge = func(base, cur, theirs []byte) ([]byte, error) { return codec.Readd(cur, base, theirs) }
			}
			merged, err := merge(k.base, cur, theirs)
			if err == nil {
				_, err = codec.Parse(merged)
			}
			if err != nil {
				mergeErr = err
				return nil, err
			}
			return merged, nil
		}, mergeTries)
		if err != nil {
			return err
		}
		if err := tx.SyncFile(e.p.Tasks, k.name); err != nil {
			return err
		}
		return tx.Audit(snag.AuditEntry{Actor: queue.Person, Agent: "the file", Action: "edit", TaskID: id, Outcome: "ok",
			Detail: k.merged})
	})
	if err == nil {
		e.log.Info(k.merged, "file", p)
		e.hub.Publish(snag.TaskEvent{Path: p, Added: new(false), Removed: new(false), Merged: true})
		e.writePlan(ctx)
		k.done()
		return merged
	}
	if errors.Is(err, taskfs.ErrChanged) && !last {
		return mergeAgain
	}
	why := err.Error()
	if mergeErr == nil && !errors.Is(err, fs.ErrNotExist) {
		e.log.Error("a save in place landed in the file snag replaced; writing it back failed", "file", p, "err", err)
	}
	saved, serr := e.p.KeepAside(k.name, theirs)
	if serr != nil {
		e.log.Error("a save in place could not be merged, nor kept aside: it is still where it was found", "file", p, "found in", k.from, "err", serr)
		return keptAside
	}
	e.log.Warn("a save in place landed in the file snag replaced and could not be merged: its bytes are kept aside",
		"file", p, "kept", saved, "why", why)
	e.Audit(ctx, snag.AuditEntry{Actor: queue.Person, Agent: "the file", Action: "edit", TaskID: id, Outcome: "recovered",
		Detail: fmt.Sprintf("a save in place landed in the file snag had just replaced and could not be merged (%s): its bytes are in %s; compare it with %s and merge by hand",
			why, project.Rel(saved), project.Rel(p))})
	// Said once the bytes are kept and audited: the board shows it, and a
	// test waits on it.
	e.hub.Publish(snag.TaskEvent{Path: p, Recovered: project.Rel(saved)})
	k.done()
	return keptAside
}

// keepLeftover keeps in .snag/recovered/ a person's save that a crash of
// snagd left in a hidden temp file (a save in place that landed in the file
// a rewrite displaced, before it was merged back: taskfs.Leftover), and says
// so in the log and the audit log. Without the bytes the rewrite was made
// on there is nothing to merge with: a person compares the two.
func (e *Engine) keepLeftover(l taskfs.Leftover) error {
	saved, err := e.p.KeepAside(l.Name, l.Data)
	if err != nil {
		e.log.Error("a save in place that a crash left in a hidden file could not be kept aside: it stays there", "file", l.Temp, "err", err)
		return err
	}
	var id string
	if t, err := codec.Parse(l.Data); err == nil {
		id = t.ID
	}
	e.log.Warn("a save in place that snagd had not merged back before it stopped was kept aside", "task file", l.Name, "kept", saved)
	e.Audit(e.runCtx, snag.AuditEntry{Actor: queue.Person, Agent: "the file", Action: "edit", TaskID: id, Outcome: "recovered",
		Detail: fmt.Sprintf("a save in place landed in the file snag had just replaced, and snagd stopped before merging it back: its bytes are in %s; compare it with %s and merge by hand",
			project.Rel(saved), project.Rel(path.Join(index.TasksFolder, l.Name)))})
	return nil
}
