package snag

import (
	"time"

	"github.com/snagdev/snag/internal/queue"
)

// VerifyState is the answer of GET /verify/{ref}: where verify of a task
// stands, with its recent runs, newest first.
type VerifyState struct {
	// Key is the task's alias.
	Key string `json:"key"`
	// Status is the task's status.
	Status queue.Status `json:"status"`
	// Running is true while a run is queued or running.
	Running bool `json:"running"`
	// Outcome is the latest run's outcome (the Outcome* constants).
	Outcome string `json:"outcome,omitempty"`
	// Reason says why the latest run ended as it did.
	Reason string `json:"reason,omitempty"`
	// LastAt is when the latest run ended.
	LastAt time.Time `json:"last_at,omitzero"`
	// Verifier is command or browser.
	Verifier string `json:"verifier,omitempty"`
	// Shot is the latest screenshot, relative to .snag/.
	Shot string `json:"shot,omitempty"`
	// Visual is the latest run's visual comparison, when it ran one.
	Visual *Visual `json:"visual,omitempty"`
	// History is the recent runs, newest first.
	History []VerifyRun `json:"history,omitempty"`
}

// Visual is a visual verify's comparison: the anchor's crop as captured
// with the same crop taken again, at the same viewport. Paths are relative
// to .snag/.
type Visual struct {
	// Before is the anchor's crop as captured.
	Before string `json:"before"`
	// After is the crop the run took.
	After string `json:"after"`
	// Diff pictures what changed: the after crop faded, the changed pixels
	// red, anti-aliasing alone amber.
	Diff string `json:"diff,omitempty"`
	// Changed is the fraction of the anchor's pixels that changed, from 0
	// to 1.
	Changed float64 `json:"changed"`
	// Identical says the two look the same: under 0.1% and under 10
	// pixels changed, anti-aliasing and sub-pixel shifts not counted.
	Identical bool `json:"identical"`
}

// VerifyRun is one check of a resolved task: queued when the task goes to
// verifying, started when a verifier takes it, ended with its outcome.
type VerifyRun struct {
	// ID numbers the run.
	ID int64 `json:"id"`
	// TaskID is the task's ULID.
	TaskID string `json:"task_id"`
	// Queued is when the run was asked for.
	Queued time.Time `json:"queued"`
	// Started is when a verifier took it.
	Started time.Time `json:"started,omitzero"`
	// Ended is when it ended.
	Ended time.Time `json:"ended,omitzero"`
	// Verifier is command or browser.
	Verifier string `json:"verifier"`
	// Command is the command line, or the URL the browser opens.
	Command string `json:"command,omitempty"`
	// Dir is where a command runs.
	Dir string `json:"dir,omitempty"`
	// SessionID is the session that asked, for an agent's resolve.
	SessionID int64 `json:"session_id,omitempty"`
	// Holder is the agent that held the task.
	Holder string `json:"holder,omitempty"`
	// Outcome is pass, fail, inconclusive, needs_approval, unavailable or
	// interrupted (the Outcome* constants).
	Outcome string `json:"outcome,omitempty"`
	// Reason says why it ended so.
	Reason string `json:"reason,omitempty"`
	// Shot is a screenshot the run took, relative to .snag/.
	Shot string `json:"shot,omitempty"`
	// Visual is the run's visual comparison, when it ran one.
	Visual *Visual `json:"visual,omitempty"`
}
