package engine

import (
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// sessionRoot is the root a session says it works in, when that is another
// worktree of the daemon's repository with a .snag/ folder; else "" (the
// daemon's own root).
func (e *Engine) sessionRoot(root string) string {
	return project.OtherWorktree(e.root, e.gitCommon, root)
}

func fromName(from string) string {
	if from == "task" {
		return "the task's verify.command"
	}
	return ".snag/config.json"
}

func approveArg(key, from string) string {
	if from == "task" {
		return key
	}
	return "--project"
}

// VerifyRequest is a resolve by the holder of a task (Session set, fenced
// by Epoch when it is not 0), or a person's request to check it (Session
// nil, By names them).
type VerifyRequest struct {
	Ref     queue.Ref
	Session *index.Session
	By      string
	Epoch   int64
	Note    string
	Commit  string
}

// Resolution is what a resolve or a person's verify did. Code says which
// answer it is: VerifyOK with Started (a check was queued) or without (one
// was already running), VerifyDisabled (resolved, not verified),
// OutcomeNeedsApproval (needs_review: the command waits for a person's
// approval), or VerifyUnavailable (verifying, no browser here).
type Resolution struct {
	Key     string
	Status  queue.Status
	Code    string
	Message string
	Started bool
	// Verify is where the check stands, when one runs; ETA is how many
	// seconds it will likely take.
	Verify *snag.VerifyState
	ETA    int
	// Of a command that waits for approval: the run's reason, the command
	// and where it comes from (task or config.json).
	Reason  string
	Command string
	From    string
}
