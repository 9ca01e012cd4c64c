package engine

import "sync/atomic"

// Progress counts the background work an engine has done since it opened:
// what a test waits for when it must know that a step has run (two more
// sweeps, the watcher's batch of its write, a second look at a file seen
// broken) instead of sleeping for as long as the step usually takes. Each
// count only grows. The daemon answers them on GET /health?progress=1.
type Progress struct {
	// Sweeps counts the sweeps of the sessions whose process is gone.
	Sweeps int64
	// Batches counts the watcher's batches applied to the index.
	Batches int64
	// SettlesDue counts the second looks made due at files that read as
	// missing or broken; Settles counts those taken (once the file had
	// time to settle) or called off. No look is pending when Settles has
	// caught up with SettlesDue.
	SettlesDue, Settles int64
	// Reconciles counts the reconciles of this clone's leases with the
	// coordination store that completed (at the start, and after a
	// rejoin); always 0 outside a team.
	Reconciles int64
}

// progress is an engine's counts, each incremented where its step ends.
// Atomic adds: they cost nothing worth measuring.
type progress struct {
	sweeps, batches, settlesDue, settles, reconciles atomic.Int64
}

// Progress returns the engine's counts of its background work. It is safe
// for concurrent use.
func (e *Engine) Progress() Progress {
	return Progress{Sweeps: e.progress.sweeps.Load(), Batches: e.progress.batches.Load(),
		SettlesDue: e.progress.settlesDue.Load(), Settles: e.progress.settles.Load(), Reconciles: e.progress.reconciles.Load()}
}
