package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// Group commit. A claim, a holder's release and a resolve that verify does
// not hold up each write one task file and a few rows. What costs is the
// durability: the temp file's fsync, the folder's fsync, the commit. So
// such a write is made in three parts:
//
//  1. under e.mu, briefly: read and check (which task, who holds it);
//  2. with no lock: the file's new bytes are made and written to a temp
//     file beside it, and synced (prepareMove), side by side with other
//     writers' temp files;
//  3. in a batch (commit): the writes waiting when the writer is free are
//     made in one transaction under e.mu, one after the other. Each write
//     is two parts there. Its check reads and writes no row: its checks
//     again (the lease, the session's count), then the swap of its file
//     (the file still holding the bytes its edit was made on, else the
//     edit is made again on the new bytes). A write whose check fails is
//     refused alone, with nothing of it written. Then its rows, which fail
//     only when the index does. Then one fsync of the folder makes every
//     swap of the batch durable, the transaction commits, and only then is
//     any of them answered.
//
// A write's rows are written after its checks passed, so no write of a
// batch needs undoing alone, and the batch needs no savepoint (each one
// cost a claim a third to a half of its CPU: releasing one frees SQLite's
// sub-journal, which modernc's allocator unmaps each time). When a
// write's rows do fail, the batch's transaction is rolled back whole and
// its writes are made again one at a time, each in a transaction of its
// own (a swap already made is not made again): the write that failed is
// answered with its error, and no other write of the batch is undone by
// it.
//
// What stays serialised is what decides: the checks, the swaps, the folder
// sync and the commit all happen under e.mu, one batch at a time. A task
// is handed out once because its claim is granted only inside the batch's
// transaction, where the lease table says whether it is held and the
// file's bytes whether it is open, after every write before it in the
// batch. A crash keeps the order of a single write: before a swap nothing
// changed but a temp file (swept at start); after it the file wins (the
// reconcile at start re-derives the lease from it); a write is answered
// only after its file and its rows are durable.

// write is one change of a batch.
type write struct {
	ctx   context.Context
	moves []*move // the files it rewrites, prepared
	// check makes the write's checks and the swaps of its files
	// (move.swap) inside the batch's transaction. It reads rows and writes
	// none: when it fails, the write is refused and nothing of it is in
	// the transaction. It may be called again (a batch made one write at
	// a time): a swap is made once.
	check func(tx *index.Tx) error
	// rows writes the write's rows, once check has passed. It fails only
	// when the index does, and the batch is then made again one write at
	// a time.
	rows  func(tx *index.Tx) error
	after func() // once the batch has committed, with e.mu held; may be nil
	err   error
	done  chan struct{} // closed when the batch of the write has committed or failed
	lead  chan struct{} // closed when the write is to make the next batch
}

// commit makes a write of moves, check and rows part of a batch and
// returns when that batch has committed (nil) or failed (its error, or
// the error of the write's own part). The write whose turn it is makes
// the batch of every write waiting then, and hands the next batch to the
// first write that arrived meanwhile.
func (e *Engine) commit(ctx context.Context, moves []*move, check, rows func(tx *index.Tx) error, after func()) error {
	return e.commitWrite(&write{ctx: ctx, moves: moves, check: check, rows: rows, after: after})
}

// commitWrite is commit of the write w.
func (e *Engine) commitWrite(w *write) error {
	w.done, w.lead = make(chan struct{}), make(chan struct{})
	e.batchMu.Lock()
	if e.batching {
		e.waiting = append(e.waiting, w)
		e.batchMu.Unlock()
		select {
		case <-w.done:
			return w.err
		case <-w.lead:
		}
		e.batchMu.Lock()
	} else {
		e.batching = true
	}
	batch := append([]*write{w}, e.waiting...)
	e.waiting = nil
	e.batchMu.Unlock()

	e.runBatch(batch)

	e.batchMu.Lock()
	if len(e.waiting) > 0 {
		next := e.waiting[0]
		e.waiting = e.waiting[1:]
		close(next.lead)
	} else {
		e.batching = false
	}
	e.batchMu.Unlock()
	return w.err
}

// errClosed answers writes that reach a batch after the engine stopped:
// nothing of them was done, and like a busy index they may be tried again
// (snagd answers 503), against the daemon that comes back.
var errClosed = fmt.Errorf("snagd is stopping: %w", index.ErrBusy)

// runBatch makes the writes of a batch in one transaction, or, when the
// rows of one of them fail, one at a time (see commit).
func (e *Engine) runBatch(batch []*write) {
	e.mu.Lock()
	defer e.mu.Unlock()
	defer func() {
		for _, w := range batch {
			for _, m := range w.moves {
				m.prep.Abandon() // a move not put leaves no temp file
			}
			close(w.done)
		}
	}()
	if e.closed.Load() {
		for _, w := range batch {
			w.err = errClosed
		}
		return
	}
	// The batch's transaction runs to its end whoever asked first; it
	// carries the first write's values (its operation, for failpoints).
	err := e.transact(batch[0].ctx, batch, false)
	var failed *rowsFailed
	if errors.As(err, &failed) {
		e.log.Warn("a write of a batch failed: its writes are made again one at a time", "writes", len(batch), "err", failed.err)
		for _, w := range batch {
			if err := e.transact(w.ctx, []*write{w}, true); err != nil && w.err == nil {
				w.err = err
			}
			if w.err == nil && w.after != nil {
				w.after()
			}
		}
		return
	}
	for _, w := range batch {
		switch {
		case w.err != nil:
		case err != nil:
			w.err = err
		case w.after != nil:
			w.after()
		}
	}
}

// rowsFailed is the error of a batch's transaction that the rows of one of
// its writes failed.
type rowsFailed struct{ err error }

func (f *rowsFailed) Error() string { return f.err.Error() }
func (f *rowsFailed) Unwrap() error { return f.err }

// transact makes the writes ws in one transaction, carrying ctx's values:
// each write's check, and when it passes its rows, then one sync of the
// folders of every swap made, and the commit. A write whose check fails
// holds its error; the transaction's error is returned, a *rowsFailed
// when a write's rows failed (w.err holds it too). again is a batch made
// again one write at a time: a write whose swap was made the first time
// is made whoever waits for it (its file is changed already).
func (e *Engine) transact(ctx context.Context, ws []*write, again bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return e.p.DB.Update(ctx, func(tx *index.Tx) error {
		var placed []*taskfs.Prepared
		for _, w := range ws {
			if w.err = w.ctx.Err(); w.err != nil && !(again && w.swapped()) {
				continue // its caller is gone; nothing of it was done
			}
			w.err = w.check(tx)
			for _, m := range w.moves {
				if m.placed {
					placed = append(placed, m.prep)
				}
			}
			if w.err != nil {
				continue
			}
			if err := w.rows(tx); err != nil {
				w.err = err
				return &rowsFailed{err: err}
			}
		}
		return e.p.Tasks.Sync(placed...)
	})
}

// swapped reports whether a swap of one of w's files was made.
func (w *write) swapped() bool {
	for _, m := range w.moves {
		if m.swapped {
			return true
		}
	}
	return false
}

// move is one rewrite of a task file by the status machine: prepared (the
// new bytes made from the file's and written to a synced temp file) with
// no lock held, then put in place (swap) and indexed (written) inside a
// transaction.
type move struct {
	item    *index.Item
	name    string
	prep    *taskfs.Prepared
	moved   *queue.Task      // the task as the new bytes hold it
	swapped bool             // the swap was made, with the outcome wrote and swapErr
	wrote   taskfs.Rewritten // what the swap put in place
	swapErr error
	placed  bool // the new bytes are in place
}

// prepareMove prepares a move of item's file through steps, each allowed
// from where the one before left the task, in one write: a resolve that
// the project's config turns straight into resolved is one rename and one
// fsync, not two. The steps are checked against the file's current bytes
// (a person may have saved since it was indexed), and again against the
// bytes the file holds when it is put, and only the lines that change are
// rewritten.
func (e *Engine) prepareMove(item *index.Item, who string, steps ...Step) (*move, error) {
	return e.prepareMoveOf(item, nil, who, steps...)
}

// prepareMoveOf is prepareMove of a task under lease l (nil: none known).
// A release whose file holds exactly what l's claim wrote puts back the
// bytes from before the claim (restore), and one whose file holds those
// already (git put them back) writes nothing.
func (e *Engine) prepareMoveOf(item *index.Item, l *index.Lease, who string, steps ...Step) (*move, error) {
	if len(steps) == 0 {
		return nil, errors.New("move: no steps")
	}
	action := steps[0].Action
	ref := item.Key
	if ref == "" {
		ref = project.Rel(item.Path)
	}
	if err := clean(item); err != nil {
		return nil, fmt.Errorf("%s %s: %w", action, ref, err)
	}
	return e.prepareBytes(item, string(action), ref, func(cur []byte, t *queue.Task) ([]byte, *queue.Task, error) {
		if l != nil && len(steps) == 1 && action == queue.ActRelease {
			if b := restore(*l, cur); b != nil {
				if moved, err := codec.Parse(b); err == nil && moved.ID == t.ID && moved.Status == queue.StatusOpen {
					return b, moved, nil
				}
			}
			if bytes.Equal(cur, l.Base) && t.Status == queue.StatusOpen {
				return cur, t, nil
			}
		}
		var fields []codec.Field
		at := t.Status
		for _, st := range steps {
			to, err := queue.Transition(at, st.Action, st.Actor)
			if err != nil {
				return nil, nil, fmt.Errorf("%s %s: %w", st.Action, t.Key, err)
			}
			fields = append(fields, changes(t, st.Action, to, who)...)
			at = to
		}
		out, err := codec.Edit(cur, lastOfEach(fields)...)
		if err != nil {
			return nil, nil, err
		}
		moved, err := codec.Parse(out)
		return out, moved, err
	})
}

// prepareBytes prepares a rewrite of item's file (what, ref name it for
// errors): change makes the new bytes, and the task they hold, from the
// file's current bytes and the task those hold, which must still be
// item's.
func (e *Engine) prepareBytes(item *index.Item, what, ref string, change func(cur []byte, t *queue.Task) ([]byte, *queue.Task, error)) (*move, error) {
	m := &move{item: item, name: project.Name(item)}
	var err error
	m.prep, err = e.tasks.Prepare(m.name, func(cur []byte) ([]byte, error) {
		t, err := codec.Parse(cur)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotClean, codec.WithPath(err, item.Path))
		}
		if t.ID != item.Task.ID {
			return nil, fmt.Errorf("%s %s: %s now holds %s: run snag reindex and try again", what, ref, item.Path, t.ID)
		}
		out, moved, err := change(cur, t)
		m.moved = moved
		return out, err
	})
	if err != nil {
		m.prep.Abandon()
		return nil, err
	}
	return m, nil
}

// swap puts the move's bytes in place (taskfs.Prepared.Put), once: when
// it is called again (a batch made again one write at a time) it returns
// what the first call did. The folder is synced by whoever commits the
// transaction, before it does (commit, or moveSteps).
func (m *move) swap() error {
	if !m.swapped {
		m.swapped = true
		m.wrote, m.swapErr = m.prep.Put()
		m.placed = m.wrote.Info != nil
	}
	return m.swapErr
}

// written indexes the bytes swap put in place, inside tx, without reading
// them back, and returns the task they hold.
func (m *move) written(tx *index.Tx, tasks *taskfs.Dir) (*queue.Task, error) {
	if m.wrote.Info == nil { // nothing written: the row is brought in step as it is
		return m.moved, tx.SyncFile(tasks, m.name)
	}
	return m.moved, tx.Written(m.name, m.wrote.New, m.wrote.Info, m.moved)
}

// put is swap, then written.
func (m *move) put(tx *index.Tx, tasks *taskfs.Dir) (*queue.Task, error) {
	if err := m.swap(); err != nil {
		return nil, err
	}
	return m.written(tx, tasks)
}
