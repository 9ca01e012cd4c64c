package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
)

// Leases survive git. A claim rewrites the task file (status, assignee,
// updated), so a person's git pull, merge or checkout meets a modified
// file, and the usual git stash puts the file back as it was before the
// claim. That is git, not a person freeing the task: the lease keeps its
// holder, the task reads as claimed (index rows show the lease, not the
// file), and nobody else is granted it; git stash pop brings the claim's
// bytes back. A person frees a task with snag release. A file edited by
// hand to say open (anything but the exact bytes from before the claim)
// still ends the lease: the file wins. So does a file found back as it was
// when snagd starts: a release cut off by a crash leaves the same bytes.
//
// A release of a task whose file holds exactly what its claim wrote puts
// the bytes from before the claim back, updated: line and all, so that a
// claim and a release that changed nothing leave git status clean.

// digest is the SHA-256 of b, in hex.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// putBack reports whether the task file of row r holds the bytes it had
// before lease l's claim: git put it back (a stash, a checkout, a merge).
//
// Only while snagd runs: a file found so at its start may be a release's
// write that a crash cut off before the lease's end was committed (the
// release writes those very bytes), so the file wins then, as before.
func (e *Engine) putBack(r *index.Row, l index.Lease) bool {
	if len(l.Base) == 0 || r.Status != queue.StatusOpen || !e.ready.Load() {
		return false
	}
	cur, _, err := e.p.Tasks.Read(project.Name(&index.Item{Row: *r}))
	return err == nil && bytes.Equal(cur, l.Base)
}

// restore is the bytes a release of a task whose file holds cur writes:
// the bytes from before lease l's claim when cur is what the claim wrote,
// else nil (the release edits the file).
func restore(l index.Lease, cur []byte) []byte {
	if len(l.Base) == 0 || l.Wrote == "" || digest(cur) != l.Wrote {
		return nil
	}
	return l.Base
}

// leasedOpen lists the tasks that live leases of this worktree's claims
// hold, by id: those whose files say open (git put them back) are not
// free, so claim-next passes over them and reads show them claimed by
// their holder.
func (e *Engine) leasedOpen(ctx context.Context) map[string]Holder {
	ls, err := e.p.DB.HeldTasks(ctx)
	if err != nil {
		return nil
	}
	out := map[string]Holder{}
	for _, l := range ls {
		if l.Wrote != "" {
			out[l.TaskID] = Holder{Name: l.Holder, Epoch: l.Epoch}
		}
	}
	return out
}
