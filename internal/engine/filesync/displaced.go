package filesync

import (
	"bytes"
	"io/fs"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/taskfs"
)

// A program that opened a task file just before snagd swapped its new
// bytes in (an editor saving in place, a script appending a line) writes
// into the file the swap displaced, which no name reaches any more. So
// taskfs.Dir.Update hands each displaced file to snagd instead of removing
// it (engine.OnDisplaced), and the service looks at it again once nothing
// can write into it: on Linux when no process has it open for writing (a
// read lease is granted), elsewhere once it has not changed for
// displacedQuiet. When it still holds the bytes snag edited, it is
// removed. When a save landed in it, snag's edit is made again on the
// person's bytes: a three-way merge (codec.Merge) of the bytes snag
// edited, the file at the path now and the displaced file, written through
// the one writer like any move (engine.MergeBack), and in the audit log;
// while the file keeps changing under that write (a person still saving),
// it is tried again every displacedEvery for up to displacedMerge, a few
// tries at a time so that other writers are not held up. When the two
// cannot be merged, the file at the path is kept and the displaced bytes
// are saved in .snag/recovered/, and the audit log names that file: no
// one's bytes are dropped. A displaced file snagd had not looked at when
// it died is found by the next start's sweep of temp files
// (taskfs.Leftover), and kept the same way by the engine.
const (
	displacedFirst = 20 * time.Millisecond  // the first look
	displacedEvery = 200 * time.Millisecond // the longest wait between looks
	displacedQuiet = time.Second            // unchanged this long: settled, where leases cannot tell
	displacedMost  = 30 * time.Second       // a file still open for writing after this is taken as it is
	displacedMerge = 10 * time.Minute       // how long a merge is tried again while the file keeps changing
	mergeHold      = 2 * time.Second        // how long a merge is kept in the file against saves made before it
	mergeLook      = 50 * time.Millisecond  // how often the file is looked at meanwhile
)

// Displaced takes a file a rewrite swapped out of place (install it with
// engine.OnDisplaced). It is called with the engine's write lock held, so
// it only starts the look. Once the service is closed the file is removed
// at once.
func (s *Service) Displaced(x *taskfs.Displaced) {
	s.displacedMu.Lock()
	defer s.displacedMu.Unlock()
	if s.displacedOff {
		s.e.TaskFiles().Discard(x)
		return
	}
	s.displacedWG.Add(1)
	go func() {
		defer s.displacedWG.Done()
		s.settleDisplaced(x)
	}()
	if x.Restored != nil {
		s.displacedWG.Add(1)
		go func() {
			defer s.displacedWG.Done()
			s.holdRestored(x)
		}()
	}
}

// A save to keep in a task file (engine.Save: theirs, made on base, merged
// into what the file holds). held says the file holds its bytes already.
// Once it has been in the file, a save that takes its lines out again gets
// back only those lines (codec.Readd), not what it held of snag's own
// scalars: a move of the task since then changed those, and rightly.
type keep struct {
	engine.Save
	held bool
}

// holdRestored keeps in the file the lines of a save that Update swapped
// straight back into place (taskfs.Displaced.Restored). For an instant the
// file held snag's bytes instead, and a program that read it then (a
// script's read, change and write) saves without the restored save's
// lines. So the restored save is held in the file as a merged displaced
// save is (keepMerged): whenever the file lacks a line it added, it is
// merged in again, on the bytes it was made on.
func (s *Service) holdRestored(x *taskfs.Displaced) {
	s.keepMerged(keep{held: true, Save: engine.Save{Name: x.Name, Base: x.Seen, Theirs: x.Restored,
		From: "memory (it was swapped back into place)", Done: func() {},
		Merged: "a save made from snag's bytes while a save that slipped in before a rewrite was being swapped back lacked that save's lines: they were merged back in"}})
}

// settleDisplaced waits until nothing can write into the displaced file,
// then removes it or brings its bytes back.
func (s *Service) settleDisplaced(x *taskfs.Displaced) {
	dir := s.e.TaskFiles()
	start := time.Now()
	wait := displacedFirst
	var last fs.FileInfo
	var still time.Time
	t := time.NewTimer(wait)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-s.ctx.Done():
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
	s.keepMerged(keep{Save: engine.Save{Name: x.Name, Base: x.Base, Theirs: theirs, From: x.Temp, Done: func() { dir.Discard(x) },
		Merged: "a save in place landed in the file snag had just replaced: snag's change was made again on the saved bytes"}})
}

// keepMerged merges the displaced bytes theirs into the file and keeps
// them there. A file the person keeps saving is merged into once they
// pause: the merge is tried again rather than its bytes kept aside. And
// as the displaced bytes were out of sight until the merge landed, a save
// made from a read just before it (an editor's or a script's read, change
// and write) lacks their lines and takes them out again: the merge is
// held until the file has kept every line they added for mergeHold, and
// made again whenever it lacks one. After displacedMerge of this, or when
// the service stops, a last try merges or keeps the bytes aside.
func (s *Service) keepMerged(k keep) {
	var held time.Time // since when the file has held the merge; zero when it does not
	if k.held {
		held = time.Now()
	}
	readd := k.held // the file has held theirs
	for since := time.Now(); ; {
		stopping := s.ctx.Err() != nil
		wait := mergeLook
		if cur, _, err := s.e.TaskFiles().Read(k.Name); err == nil && !held.IsZero() && !codec.Lacks(cur, k.Base, k.Theirs) {
			if stopping || time.Since(held) >= mergeHold {
				return
			}
		} else {
			held = time.Time{}
			switch s.e.MergeBack(k.Save, readd, stopping || time.Since(since) >= displacedMerge) {
			case engine.Merged:
				held, readd = time.Now(), true
			case engine.KeptAside:
				return
			case engine.MergeAgain:
				wait = displacedEvery
			}
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(wait):
		}
	}
}
