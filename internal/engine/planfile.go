package engine

import (
	"context"
	"time"
)

// writePlan asks for plan.json to be regenerated. Requests are debounced:
// one write follows a burst of changes, PlanDelay after the first. It never
// waits for a write under way (which can take a second on a loaded machine
// at 10,000 tasks, while the caller holds mu): a request made meanwhile
// arms the next write.
func (e *Engine) writePlan(ctx context.Context) {
	e.planMu.Lock()
	defer e.planMu.Unlock()
	if e.planTimer == nil && !e.planStopped {
		// Wait at least ten times as long as the last write took, so a
		// burst of claims on a large queue is not spent rewriting it.
		e.planTimer = time.AfterFunc(max(e.opts.PlanDelay, 10*e.planTook), e.flushPlan)
	}
}

// flushPlan writes plan.json from the index as it is now. It reads one
// consistent snapshot and needs no write lock; planWrite keeps two flushes
// from racing to the rename.
func (e *Engine) flushPlan() {
	e.planWrite.Lock()
	defer e.planWrite.Unlock()
	e.planMu.Lock()
	e.planTimer = nil // a change from here on arms the next write
	stopped := e.planStopped
	e.planMu.Unlock()
	if stopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := e.p.WritePlan(ctx); err != nil {
		e.log.Warn("plan.json not written", "err", err)
	}
	e.planMu.Lock()
	e.planTook = time.Since(start)
	e.planMu.Unlock()
}

// stopPlan writes a pending plan.json now, waits for a write under way,
// and stops further writes. The caller holds mu, so no change asks for
// another meanwhile.
func (e *Engine) stopPlan() {
	e.planMu.Lock()
	// Armed, and its write not begun (a write clears the timer first):
	// the timer may have fired already, its write waiting for planWrite.
	pending := e.planTimer != nil
	if pending {
		e.planTimer.Stop()
	}
	e.planTimer = nil
	e.planMu.Unlock()
	if pending {
		e.flushPlan()
	}
	e.planWrite.Lock()
	defer e.planWrite.Unlock()
	e.planMu.Lock()
	e.planStopped = true
	e.planMu.Unlock()
}
