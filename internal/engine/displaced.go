package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
)

// A save in place that landed in a file snag's rewrite displaced is
// looked at again by the file sync service (internal/engine/filesync),
// which says when to merge it back (MergeBack); the merge, a move, is
// made here. A displaced file snagd had not looked at when it died is
// found by the next start's sweep of temp files (taskfs.Leftover), and
// kept aside (keepLeftover).

// mergeTries is how many times one merge is tried under the write lock
// while the file keeps changing under it.
const mergeTries = 3

// bringBack puts a save that landed in a displaced file (or was swapped
// back into place) back into the task file, merged with what the file
// holds now, or keeps it in .snag/recovered/ when it cannot be merged, and
// then calls k.Done (unless its bytes could not be kept aside either). It
// holds the write lock. When the file keeps changing under the merge it
// does nothing and reports MergeAgain, unless this is the last try: the
// caller tries again in a moment. With readd, only the lines of theirs the
// file lacks go back in (codec.Readd).
func (e *Engine) bringBack(ctx context.Context, k Save, readd, last bool) MergeOutcome {
	p := path.Join(index.TasksFolder, k.Name)
	theirs := k.Theirs
	id := ""
	for _, b := range [][]byte{theirs, k.Base} {
		if t, err := codec.Parse(b); err == nil {
			id = t.ID
			break
		}
	}
	var mergeErr error
	err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := e.p.Tasks.RewriteWithin(k.Name, func(cur []byte) ([]byte, error) {
			if _, err := codec.Parse(cur); err != nil {
				// Caught mid-save (an editor writing in place truncates
				// first), or left broken for now: merged into later.
				return nil, fmt.Errorf("%w: %w", taskfs.ErrChanged, err)
			}
			merge := codec.Merge
			if readd {
				merge = func(base, cur, theirs []byte) ([]byte, error) { return codec.Readd(cur, base, theirs) }
			}
			merged, err := merge(k.Base, cur, theirs)
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
		if err := tx.SyncFile(e.p.Tasks, k.Name); err != nil {
			return err
		}
		return tx.Audit(snag.AuditEntry{Actor: queue.Person, Agent: "the file", Action: "edit", TaskID: id, Outcome: "ok",
			Detail: k.Merged})
	})
	if err == nil {
		e.log.Info(k.Merged, "file", p)
		e.hub.Publish(snag.TaskEvent{Path: p, Added: new(false), Removed: new(false), Merged: true})
		e.writePlan(ctx)
		k.Done()
		return Merged
	}
	if errors.Is(err, taskfs.ErrChanged) && !last {
		return MergeAgain
	}
	why := err.Error()
	if mergeErr == nil && !errors.Is(err, fs.ErrNotExist) {
		e.log.Error("a save in place landed in the file snag replaced; writing it back failed", "file", p, "err", err)
	}
	saved, serr := e.p.KeepAside(k.Name, theirs)
	if serr != nil {
		e.log.Error("a save in place could not be merged, nor kept aside: it is still where it was found", "file", p, "found in", k.From, "err", serr)
		return KeptAside
	}
	e.log.Warn("a save in place landed in the file snag replaced and could not be merged: its bytes are kept aside",
		"file", p, "kept", saved, "why", why)
	e.Audit(ctx, snag.AuditEntry{Actor: queue.Person, Agent: "the file", Action: "edit", TaskID: id, Outcome: "recovered",
		Detail: fmt.Sprintf("a save in place landed in the file snag had just replaced and could not be merged (%s): its bytes are in %s; compare it with %s and merge by hand",
			why, project.Rel(saved), project.Rel(p))})
	// Said once the bytes are kept and audited: the board shows it, and a
	// test waits on it.
	e.hub.Publish(snag.TaskEvent{Path: p, Recovered: project.Rel(saved)})
	k.Done()
	return KeptAside
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
