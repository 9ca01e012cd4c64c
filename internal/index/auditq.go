package index

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"zombiezen.com/go/sqlite"
)

// AuditDelay is how long an entry queued by [DB.AuditLater] waits at most
// before it is written, when no other write comes first.
const AuditDelay = 250 * time.Millisecond

// maxQueued bounds the entries waiting while writes fail (a full disk): past
// it, the oldest are dropped, and the next entry written says how many.
const maxQueued = 10_000

// auditQueue holds audit entries to be written with the next write
// transaction, whatever it is, or by a flush at most AuditDelay after the
// first of them was queued.
type auditQueue struct {
	mu      sync.Mutex
	pending []snag.AuditEntry
	dropped int
	timer   *time.Timer
	closed  bool
}

// AuditLater queues an audit entry (its At is now when unset) to be written
// after the caller has gone on: with the next write transaction of any
// kind, so entries keep the order they were made in, or at most
// [AuditDelay] later. Reads of the audit log write what is queued first,
// and Close does. It is for entries that record a call, not a change: an
// agent's tool call, whose answer should not wait for a write of its own
// (nor make the next read reload pages the write dropped from every other
// connection's cache). A change's own entry goes in its transaction
// ([Tx.Audit]). A crash loses at most the last AuditDelay of these entries.
func (db *DB) AuditLater(e snag.AuditEntry) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	q := &db.audits
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if len(q.pending) >= maxQueued {
		q.pending = q.pending[1:]
		q.dropped++
	}
	q.pending = append(q.pending, e)
	q.arm(db)
}

// FlushAudit writes the entries [DB.AuditLater] queued, now.
func (db *DB) FlushAudit(ctx context.Context) error {
	q := &db.audits
	q.mu.Lock()
	n := len(q.pending)
	q.mu.Unlock()
	if n == 0 {
		return nil
	}
	return db.write(ctx, func(*sqlite.Conn) error { return nil })
}

// take removes the queued entries, for a write transaction to insert
// first. When that transaction does not commit, put gives them back.
func (q *auditQueue) take() (entries []snag.AuditEntry, dropped int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	entries, dropped = q.pending, q.dropped
	q.pending, q.dropped = nil, 0
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	return entries, dropped
}

// put gives back entries a write took and did not commit; a flush is
// tried again after AuditDelay.
func (q *auditQueue) put(db *DB, entries []snag.AuditEntry, dropped int) {
	if len(entries) == 0 && dropped == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(entries, q.pending...)
	q.dropped += dropped
	if over := len(q.pending) - maxQueued; over > 0 {
		q.pending = q.pending[over:]
		q.dropped += over
	}
	q.arm(db)
}

// arm starts the flush timer, unless it runs or the queue is closed. The
// caller holds q.mu.
func (q *auditQueue) arm(db *DB) {
	if q.timer != nil || q.closed {
		return
	}
	q.timer = time.AfterFunc(AuditDelay, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db.FlushAudit(ctx)
	})
}

// close stops the flush timer and takes no more entries.
func (q *auditQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
}

// writeQueued inserts the entries take returned, inside tx, and when some
// were dropped, one entry that says how many.
func writeQueued(tx *Tx, entries []snag.AuditEntry, dropped int) error {
	if dropped > 0 {
		err := tx.Audit(snag.AuditEntry{Actor: queue.System, Action: "audit", Outcome: "dropped",
			Detail: "entries of tool calls dropped while snag.db could not be written: " + strconv.Itoa(dropped)})
		if err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := tx.Audit(e); err != nil {
			return err
		}
	}
	return nil
}
