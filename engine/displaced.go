package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/project"
	"github.com/snagdev/snag/queue"
)

// A program that opened a task file just before snagd swapped its new
// bytes in (an editor saving in place, a script appending a line) writes
// into the file the swap displaced, which no name reaches any more. So
// queue.Dir.Update hands each displaced file to snagd instead of removing
// it, and snagd looks at it again once nothing can write into it: on Linux
// when no process has it open for writing (a read lease is granted),
// elsewhere once it has not changed for displacedQuiet. When it still
// holds the bytes snag edited, it is removed. When a save landed in it,
// snag's edit is made again on the person's bytes: a three-way merge
// (queue.Merge) of the bytes snag edited, the file at the path now and the
// displaced file, written through the one writer like any move, and in
// the audit log. When the two cannot be merged, the file at the path is
// kept and the displaced bytes are saved in .snag/recovered/, and the
// audit log names that file: no one's bytes are dropped.
const (
	displacedFirst = 20 * time.Millisecond  // the first look
	displacedEvery = 200 * time.Millisecond // the longest wait between looks
	displacedQuiet = time.Second            // unchanged this long: settled, where leases cannot tell
	displacedMost  = 30 * time.Second       // a file still open for writing after this is taken as it is
)

// RecoveredFolder, in .snag/, keeps the bytes of a save that could not be
// merged with snag's write.
const RecoveredFolder = "recovered"

// displaced takes a file Update swapped out of place. It is called with the
// write lock held, so it only starts the look.
func (e *Engine) displaced(x *queue.Displaced) {
	if e.displacedOff.Load() {
		e.p.Tasks.Discard(x)
		return
	}
	e.displacedWG.Add(1)
	go func() {
		defer e.displacedWG.Done()
		e.settleDisplaced(x)
	}()
}

// settleDisplaced waits until nothing can write into the displaced file,
// then removes it or brings its bytes back.
func (e *Engine) settleDisplaced(x *queue.Displaced) {
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
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.bringBack(ctx, x, theirs)
	dir.Discard(x)
}

// bringBack puts a save that landed in a displaced file back into the task
// file, merged with what the file holds now, or keeps it in
// .snag/recovered/ when it cannot be merged. It holds the write lock.
func (e *Engine) bringBack(ctx context.Context, x *queue.Displaced, theirs []byte) {
	p := path.Join(index.TasksFolder, x.Name)
	id := ""
	for _, b := range [][]byte{theirs, x.Base} {
		if t, err := queue.Parse(b); err == nil {
			id = t.ID
			break
		}
	}
	var mergeErr error
	err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
		_, _, err := e.p.Tasks.Update(x.Name, func(cur []byte) ([]byte, error) {
			merged, err := queue.Merge(x.Base, cur, theirs)
			if err == nil {
				_, err = queue.Parse(merged)
			}
			if err != nil {
				mergeErr = err
				return nil, err
			}
			return merged, nil
		})
		if err != nil {
			return err
		}
		if err := tx.SyncFile(e.p.Tasks, x.Name); err != nil {
			return err
		}
		return tx.Audit(index.AuditEntry{Actor: queue.Person, Agent: "the file", Action: "edit", TaskID: id, Outcome: "ok",
			Detail: "a save in place landed in the file snag had just replaced: snag's change was made again on the saved bytes"})
	})
	if err == nil {
		e.log.Info("a save in place landed in the file snag replaced: merged", "file", p)
		e.hub.Publish("task", map[string]any{"path": p, "added": false, "removed": false})
		e.writePlan(ctx)
		return
	}
	why := err.Error()
	if mergeErr == nil && !errors.Is(err, fs.ErrNotExist) {
		e.log.Error("a save in place landed in the file snag replaced; writing it back failed", "file", p, "err", err)
	}
	saved, serr := e.recover(x.Name, theirs)
	if serr != nil {
		e.log.Error("a save in place could not be merged, nor kept aside: it is still in the hidden file", "file", p, "displaced", x.Temp, "err", serr)
		return
	}
	e.log.Warn("a save in place landed in the file snag replaced and could not be merged: its bytes are kept aside",
		"file", p, "kept", saved, "why", why)
	e.Audit(ctx, index.AuditEntry{Actor: queue.Person, Agent: "the file", Action: "edit", TaskID: id, Outcome: "recovered",
		Detail: fmt.Sprintf("a save in place landed in the file snag had just replaced and could not be merged (%s): its bytes are in %s; compare it with %s and merge by hand",
			why, project.Rel(saved), project.Rel(p))})
}

// recover writes the bytes of a save that could not be merged into
// .snag/recovered/ and returns the path there, relative to .snag/.
func (e *Engine) recover(name string, data []byte) (string, error) {
	folder := filepath.Join(e.root, project.Folder, RecoveredFolder)
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return "", err
	}
	dir, err := queue.OpenDir(folder)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	stamp := time.Now().UTC().Format("20060102T150405.000000Z")
	saved := stamp + " " + name
	if err := dir.Create(saved, data); err != nil {
		return "", err
	}
	return path.Join(RecoveredFolder, saved), nil
}
