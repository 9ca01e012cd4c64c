package ops

import (
	"encoding/json"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// TaskList is the answer of GET /tasks: one page of the queue, in queue
// order (wave, severity, age, id).
type TaskList struct {
	// Next continues the list after the page's last task (pass it as
	// cursor); empty at the end.
	Next string `json:"next"`
	// Tasks is the page; [] when nothing matches.
	Tasks []snag.Task `json:"tasks"`
}

// SearchResult is the answer of GET /search, best match first.
type SearchResult struct {
	// Hits are the matching tasks; null when none matched.
	Hits []snag.Hit `json:"hits"`
	// Notes are the matching notes (.snag/notes), best first; absent when
	// none matched.
	Notes []snag.Note `json:"notes,omitempty"`
}

// AddRequest is the body of POST /tasks. A person's task (no session
// header) is vetted and open; an agent's is unvetted and goes to the inbox
// until a person promotes it.
type AddRequest struct {
	// Title is the task's title; required.
	Title string `json:"title"`
	// Body is the markdown body.
	Body string `json:"body,omitempty"`
	// Kind is bug, feature, chore or question; bug when empty.
	Kind string `json:"kind,omitempty"`
	// Severity is critical, high, medium or low; medium when empty.
	Severity string `json:"severity,omitempty"`
	// Wave orders the queue; 1 when 0.
	Wave int `json:"wave,omitempty"`
	// Plan is the plan the task belongs to.
	Plan string `json:"plan,omitempty"`
	// Files are suspect files, as path or path:line-line.
	Files []string `json:"files,omitempty"`
	// DependsOn names tasks that must be resolved first.
	DependsOn []string `json:"depends_on,omitempty"`
	// By is the person, for the audit log; an agent's name comes from its
	// session.
	By string `json:"by,omitempty"`
}

// Added is the answer of POST /tasks (201).
type Added struct {
	// ID is the new task's ULID.
	ID string `json:"id"`
	// Key is its alias.
	Key string `json:"key"`
	// Path is its file, relative to the project root.
	Path string `json:"path"`
	// Status is open for a person's task, inbox for an agent's.
	Status queue.Status `json:"status"`
	// Trust is vetted for a person's task, unvetted for an agent's.
	Trust queue.Trust `json:"trust"`
	// Warnings say what a person's new task names that is not there yet
	// (a task it depends on, its plan): it was added, and waits on them.
	Warnings []string `json:"warnings,omitempty"`
}

// MoveRequest is the body of a person's move: POST /tasks/{ref}/{action}
// (promote, reject, cancel, reopen), POST /tasks/{ref}/accept, a person's
// POST /tasks/{ref}/release, POST /reindex and POST /login-codes.
type MoveRequest struct {
	// By is the person, for the audit log.
	By string `json:"by,omitempty"`
	// Reason says why, for the audit log.
	Reason string `json:"reason,omitempty"`
}

// TaskRef names one task, by id or alias: GET /tasks/{ref} and GET
// /verify/{ref}.
type TaskRef struct {
	// Ref is the task's id or alias.
	Ref string `json:"-" path:"ref"`
}

// TaskMove is a person's move of one task: POST /tasks/{ref}/{action},
// /tasks/{ref}/accept and a person's /tasks/{ref}/release.
type TaskMove struct {
	// Ref is the task's id or alias.
	Ref string `json:"-" path:"ref"`
	// Action is promote, reject, cancel or reopen (POST
	// /tasks/{ref}/{action}).
	Action string `json:"-" path:"action"`
	MoveRequest
	// Severity is the severity a promote sets in the same write as the
	// move: critical, high, medium or low; "" keeps the file's. A promote's
	// alone: another move does not take it.
	Severity string `json:"severity,omitempty"`
	// Wave is the wave a promote sets in the same write as the move, from 1
	// to 9999; 0 keeps the file's. A promote's alone, as Severity.
	Wave int `json:"wave,omitempty"`
}

// Moved is the answer of a person's move (promote, reject, cancel, reopen,
// accept).
type Moved struct {
	// ID is the task's ULID.
	ID string `json:"id"`
	// Key is its alias.
	Key string `json:"key"`
	// Status is where the move took it.
	Status queue.Status `json:"status"`
}

// EditRequest is the body of POST /tasks/{ref}/edit: a person's change of
// a task's fields (snag edit, snag dep, the board's edit form). A field
// left out keeps what the file says; only the values that change are
// rewritten in the file.
type EditRequest struct {
	// Ref is the task, by id or alias.
	Ref string `json:"-" path:"ref"`
	// Title is the new title.
	Title *string `json:"title,omitempty"`
	// Severity is critical, high, medium or low.
	Severity *string `json:"severity,omitempty"`
	// Kind is the task's kind (bug, feature ...).
	Kind *string `json:"kind,omitempty"`
	// Wave orders the queue: lower waves are handed out first.
	Wave *int `json:"wave,omitempty"`
	// Plan is the plan's slug; "" takes the task out of its plan.
	Plan *string `json:"plan,omitempty"`
	// Files is the whole list of suspect files, as path or
	// path:line-line; an empty list removes them.
	Files *[]string `json:"files,omitempty"`
	// AddDeps are tasks it comes to depend on: each must be there and
	// close no cycle.
	AddDeps []string `json:"add_depends_on,omitempty"`
	// RemoveDeps are entries of its depends_on to drop, by id or key.
	RemoveDeps []string `json:"remove_depends_on,omitempty"`
	// By is the person, for the audit log.
	By string `json:"by,omitempty"`
}

// Edited is the answer of POST /tasks/{ref}/edit.
type Edited struct {
	// Task is the task as its file now holds it.
	Task snag.Task `json:"task"`
	// Changed says what changed, one "field old -> new" each; empty when
	// the file said so already (nothing was written).
	Changed []string `json:"changed"`
	// Warnings say what the task now names that is not there yet.
	Warnings []string `json:"warnings,omitempty"`
}

// ClaimRequest is the body of POST /tasks/{ref}/claim and POST /claim
// (the next ready task). It needs the session header.
type ClaimRequest struct {
	// Ref is the task to claim, by id or alias; none: the next ready one.
	Ref string `json:"-" path:"ref"`
	// Force claims a task whose dependencies are not all resolved.
	Force bool `json:"force,omitempty"`
	// Worktree makes a git worktree for the task, on a branch snag/<key>
	// (as the project's claim.worktree does for every claim).
	Worktree bool `json:"worktree,omitempty"`
	// Base is the branch (or commit) the task's branch starts from, when
	// its worktree is made: default config.json's claim.base, else the
	// repository's default branch.
	Base string `json:"base,omitempty"`
}

// Claim is the answer of a claim. When nothing was claimed (POST /claim
// with nothing ready), Task is null and Reason says why.
type Claim struct {
	// Task is the claimed task, now claimed by the session.
	Task *snag.Task `json:"task"`
	// Epoch fences the lease: a release or resolve sends it, and one with
	// an older epoch is refused as stale.
	Epoch int64 `json:"epoch,omitempty"`
	// Reason says why nothing was claimed.
	Reason string `json:"reason,omitempty"`
	// Note says more about the task claimed: that the session had
	// released it, and nothing else was ready (a claim of the next task
	// passes over the tasks its session released while another is ready).
	Note string `json:"note,omitempty"`
	// Worktree is the task's git worktree, when one was made: work there.
	Worktree string `json:"worktree,omitempty"`
	// Branch is the worktree's branch.
	Branch string `json:"branch,omitempty"`
	// Handle names this lease in later calls of its own (release,
	// resolve, handoff, file claims; api.HandleHeader) from any connection
	// with the same credential: a restarted bridge, or an agent no
	// connection stands for, acts on the lease with it, and on nothing
	// else. snagd keeps only its hash.
	Handle string `json:"handle,omitempty"`
}

// LeaseRequest is the body of a holder's POST /tasks/{ref}/release (with
// the session header).
type LeaseRequest struct {
	// Ref is the task, by id or alias.
	Ref string `json:"-" path:"ref"`
	// Epoch is the lease's epoch, from the claim.
	Epoch int64 `json:"epoch"`
	// Reason says why the task goes back; a release needs one.
	Reason string `json:"reason,omitempty"`
	// Note says more, for the audit log.
	Note string `json:"note,omitempty"`
	// Commit names a commit, for the audit log.
	Commit string `json:"commit,omitempty"`
}

// Released is the answer of a release, a holder's or a person's.
type Released struct {
	// Key is the task's alias.
	Key string `json:"key"`
	// Status is open: the task is back in the queue.
	Status queue.Status `json:"status"`
}

// The codes of a verify dry run and of a resolve (VerifyPlan.Code,
// Resolved.Code).
const (
	// VerifyOK: a verifier can check the task; Verifier says which.
	VerifyOK = "ok"
	// VerifyNoCaptureURL: nothing can check the task (no command, no
	// captured page): it stays where it is and a person resolves it.
	VerifyNoCaptureURL = "no_capture_url"
	// VerifyDisabled: the project resolves without verify; a resolve makes
	// the task resolved with verified: false.
	VerifyDisabled = "verify_disabled"
	// VerifyUnavailable: the check needs a browser and none is here; the
	// task stays verifying and asking again later is right (HTTP 503).
	VerifyUnavailable = "verify_unavailable"
	// VerifyNeedsApproval: the verify command waits for a person's
	// approval; nothing ran and the task is needs_review.
	VerifyNeedsApproval = "needs_approval"
)

// AuditLog is the answer of GET /audit: entries after the given id, oldest
// first.
type AuditLog struct {
	// Entries are the entries; [] when none.
	Entries []snag.AuditEntry `json:"entries"`
}

// Reindexed is the answer of POST /reindex: the index was rebuilt from the
// task files (live state kept).
type Reindexed struct {
	// Failed counts the files that did not parse.
	Failed int `json:"failed"`
	// Files counts the files read.
	Files int `json:"files"`
	// MS is how long the rebuild took, in milliseconds.
	MS int64 `json:"ms"`
}

// Rescanned is the answer of POST /rescan: a full read of the task files
// is done.
type Rescanned struct {
	// Done is always true.
	Done bool `json:"done"`
}

// Event is one event of GET /events, a stream of server-sent events
// (text/event-stream): its id: line, its event: line (one of the event
// kinds, or resync when events were missed) and its data: line, one JSON
// object, as the kind's type writes it (TaskEvent for task, LeaseEvent for
// lease, and so on; an event another clone of a team relayed keeps that
// clone's type and object, with source, host and branch added). A field
// left out when empty is absent from the events of its kind that do not
// carry it; a pointer field (*int, *bool) is written whenever it is
// carried, 0 and false too. Task events name the task by key; lease and
// verify events by task (see EventTask).
type Event struct {
	// ID numbers the event; send the last one seen as ?since= to continue
	// after it.
	ID int64
	// Type is the event's type.
	Type string
	// Data is the event's JSON object.
	Data json.RawMessage
}

// EventTask is the part of an event's data that names a task: Key in task
// events, Task in lease and verify events.
type EventTask struct {
	// Key is the task's alias, in task events.
	Key string `json:"key,omitempty"`
	// Task is the task's alias, in lease and verify events.
	Task string `json:"task,omitempty"`
}
