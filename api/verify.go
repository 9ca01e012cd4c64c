package api

import (
	"time"

	"github.com/snagdev/snag/internal/queue"
)

// VerifyRequest is the body of POST /verify/{ref}, and of a holder's POST
// /tasks/{ref}/resolve (which sends epoch, note and commit).
type VerifyRequest struct {
	// DryRun says what would check the task and changes nothing: the
	// answer is a VerifyPlan.
	DryRun bool `json:"dry_run,omitempty"`
	// Epoch is the holder's lease epoch (an agent's request).
	Epoch int64 `json:"epoch,omitempty"`
	// Note says what was done, for the audit log.
	Note string `json:"note,omitempty"`
	// Commit names the commit with the fix.
	Commit string `json:"commit,omitempty"`
	// By is the person, for the audit log (a request without a session).
	By string `json:"by,omitempty"`
}

// VerifyPlan is the answer of a dry run (POST /verify/{ref} with dry_run):
// what would check the task. It is answered 503 when the check needs a
// browser and none is here (code verify_unavailable).
type VerifyPlan struct {
	// Key is the task's alias.
	Key string `json:"key"`
	// Code is ok, no_capture_url, verify_disabled or verify_unavailable
	// (the Verify* constants).
	Code string `json:"code"`
	// Error is the code again on a 503, as every error answer has it.
	Error string `json:"error,omitempty"`
	// Verifier is command or browser.
	Verifier string `json:"verifier,omitempty"`
	// Command is the verify command that would run.
	Command string `json:"command,omitempty"`
	// From says where the command comes from: task or config.json.
	From string `json:"from,omitempty"`
	// URL is the captured page a browser would open again.
	URL string `json:"url,omitempty"`
	// Dir is where the command would run.
	Dir string `json:"dir,omitempty"`
	// Approved says whether a person approved the command on this
	// machine; absent for a browser check.
	Approved *bool `json:"approved,omitempty"`
	// Message says it in a sentence, with the fix when nothing can check.
	Message string `json:"message"`
}

// Resolved is the answer of a holder's POST /tasks/{ref}/resolve and of a
// person's POST /verify/{ref} without dry_run. A started check answers 202
// with Verify and ETASeconds; verify disabled answers 200, resolved with
// Verified false; a command waiting for approval answers 200,
// needs_review, with Outcome, Reason, Command and From; no browser answers
// 503 with Error verify_unavailable; a check already running answers 202
// with Verify and Message alone.
type Resolved struct {
	// Code is a verify code (VerifyOK, VerifyDisabled, VerifyUnavailable,
	// VerifyNeedsApproval).
	Code string `json:"code,omitempty"`
	// Command is the command that waits for approval.
	Command string `json:"command,omitempty"`
	// Error is the code again on a 503.
	Error string `json:"error,omitempty"`
	// ETASeconds is snagd's guess of how long the check takes: the last
	// run's length, or 30 s for a command and 10 s for a browser.
	ETASeconds int `json:"eta_seconds,omitempty"`
	// From says where the waiting command comes from: task or config.json.
	From string `json:"from,omitempty"`
	// Key is the task's alias.
	Key string `json:"key"`
	// Message says what happened and what to do next.
	Message string `json:"message,omitempty"`
	// Outcome is the run's outcome, when it is known at once.
	Outcome string `json:"outcome,omitempty"`
	// Reason says why, with the commands that fix it.
	Reason string `json:"reason,omitempty"`
	// Status is where the task is now.
	Status queue.Status `json:"status"`
	// Verified is false when the task was resolved without a check.
	Verified *bool `json:"verified,omitempty"`
	// Verify is the check that was started or is running.
	Verify *VerifyState `json:"verify,omitempty"`
}

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
