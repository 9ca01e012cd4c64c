package ops

import (
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// VerifyRequest is the body of POST /verify/{ref}, and of a holder's POST
// /tasks/{ref}/resolve (which sends epoch, note and commit).
type VerifyRequest struct {
	// Ref is the task, by id or alias.
	Ref string `json:"-" path:"ref"`
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
	Verify *snag.VerifyState `json:"verify,omitempty"`
}

// AnswerStatus is 503, with the error verify_unavailable, when the check
// needs a browser and none is here; else def.
func (p VerifyPlan) AnswerStatus(def int) (int, *Error) {
	if p.Code == VerifyUnavailable {
		return 503, &Error{Status: 503, Code: p.Code, Message: p.Message}
	}
	return def, nil
}

// AnswerStatus is 202 while a check runs, 503 (verify_unavailable) when
// it needs a browser and none is here, else 200.
func (r Resolved) AnswerStatus(int) (int, *Error) {
	switch {
	case r.Code == VerifyUnavailable:
		return 503, &Error{Status: 503, Code: r.Code, Message: r.Message}
	case r.Verify != nil:
		return 202, nil
	}
	return 200, nil
}
