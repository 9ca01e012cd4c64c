package snag

import (
	"time"

	"github.com/snagdev/snag/internal/queue"
)

// Counts are the number of task rows in the index, and of those with a
// problem (a file that does not parse, or a duplicate id).
type Counts struct {
	// Tasks counts every row, problems included.
	Tasks int `json:"tasks"`
	// Problems counts the rows whose state is not ok, or that are
	// duplicates.
	Problems int `json:"problems"`
	// Dangling counts the depends_on entries of readable tasks that name
	// no task (the board's Problems page lists them with the rows).
	Dangling int `json:"dangling"`
}

// Task is a task as lists show it: one row of the queue. GET /tasks,
// GET /search, GET /tasks/{ref} and a claim answer it.
type Task struct {
	// ID is the task's ULID, its name that never changes.
	ID string `json:"id" db:"id"`
	// Key is its alias, SNAG-12, as people type it.
	Key string `json:"key" db:"key"`
	// Title is the task's title.
	Title string `json:"title" db:"title"`
	// Status is where the task is: inbox, open, claimed, verifying,
	// needs_review, resolved, rejected or cancelled.
	Status queue.Status `json:"status" db:"status"`
	// Trust is vetted (a person filed or promoted it) or unvetted (an
	// agent filed it; it waits in the inbox).
	Trust queue.Trust `json:"trust" db:"trust"`
	// Severity is critical, high, medium or low.
	Severity queue.Severity `json:"severity" db:"severity"`
	// Kind is bug, feature, chore or question.
	Kind queue.Kind `json:"kind" db:"kind"`
	// Wave orders the queue: lower waves are handed out first.
	Wave int `json:"wave" db:"wave"`
	// Plan is the plan the task belongs to, if any.
	Plan string `json:"plan,omitempty" db:"plan"`
	// Assignee is the agent or person who holds or last held it.
	Assignee string `json:"assignee,omitempty" db:"assignee"`
	// File is the first suspect file, as path or path:line-line.
	File string `json:"file,omitempty" db:"first_file"`
	// BlockedBy names the unresolved tasks it depends on.
	BlockedBy []string `json:"blocked_by,omitempty"`
	// Path is the task file, relative to .snag/.
	Path string `json:"path" db:"path,readonly"`
	// State is ok, invalid, conflict or missing: whether the file reads
	// cleanly; Error says why when it does not.
	State string `json:"state" db:"state,readonly"`
	// Error says what is wrong with the file, and the fix, when State is
	// not ok.
	Error string `json:"error,omitempty" db:"error,readonly"`
	// Stale is set when the row holds the last good data of a file that no
	// longer parses.
	Stale bool `json:"stale,omitempty" db:"stale,readonly"`
	// Duplicate is set when another file has the same id or alias.
	Duplicate bool `json:"duplicate,omitempty" db:"dup,readonly"`
	// HeldIn is the project root in another worktree of the repository
	// where Assignee holds the task, when this worktree's file says it is
	// open: the task is claimed there, and a claim of it here is refused.
	HeldIn string `json:"held_in,omitempty"`
	// HeldOn is the machine of another clone of the team where Assignee
	// holds the task, when this clone's file says it is open (team mode):
	// the task is claimed there, and a claim of it here is refused.
	HeldOn string `json:"held_on,omitempty"`
}

// The states of a task row (Task.State).
const (
	// StateOK: the file parses and is the task's only file.
	StateOK = "ok"
	// StateInvalid: the file does not parse; the row keeps its last good
	// data, marked stale, or has none.
	StateInvalid = "invalid"
	// StateConflict: the file has git conflict markers.
	StateConflict = "conflict"
	// StateMissing: a claimed task's file left tasks/; its row and lease
	// are kept until it comes back or the lease ends.
	StateMissing = "missing"
)

// TaskDetail is the answer of GET /tasks/{ref}: one task with its data and
// body.
type TaskDetail struct {
	// Body is the markdown after the frontmatter, byte for byte; absent
	// for a file that never parsed.
	Body *string `json:"body,omitempty"`
	// Row is the task as lists show it.
	Row Task `json:"row"`
	// SHA256 is the hex hash of the file's bytes when snagd last read it.
	SHA256 string `json:"sha256"`
	// Task is the task's frontmatter data; null for a file that never
	// parsed.
	Task *queue.Task `json:"task"`
	// TaskFile is the task file, relative to the project root
	// (.snag/tasks/...).
	TaskFile string `json:"task_file"`
	// Verify is where verify of the task stands, without its history,
	// when a check runs or has run.
	Verify *VerifyState `json:"verify,omitempty"`
	// DependsOn is the task's depends_on as people read it: an entry
	// written by id is named by its task's key.
	DependsOn []string `json:"depends_on,omitempty"`
}

// Hit is one answer of a search: a task and the text that matched, with
// the matched words in [brackets].
type Hit struct {
	Task
	// Snippet is the matching text.
	Snippet string `json:"snippet"`
}

// The outcomes of a verify run (VerifyRun.Outcome, VerifyState.Outcome).
const (
	// OutcomePass: the check passed; the task is resolved, verified.
	OutcomePass = "pass"
	// OutcomeFail: the check failed; the task goes back to its holder, or
	// to the queue when the holder is gone.
	OutcomeFail = "fail"
	// OutcomeInconclusive: the check could not decide; needs_review.
	OutcomeInconclusive = "inconclusive"
	// OutcomeNeedsApproval: the command waits for approval; needs_review,
	// and no process was started.
	OutcomeNeedsApproval = "needs_approval"
	// OutcomeUnavailable: the browser went missing; the task stays
	// verifying.
	OutcomeUnavailable = "unavailable"
	// OutcomeInterrupted: snagd stopped during the run; it was queued
	// again.
	OutcomeInterrupted = "interrupted"
)

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	// ID numbers the entry; later entries have higher ids.
	ID int64 `json:"id,omitempty"`
	// SessionID is the agent's session, for an agent's act.
	SessionID int64 `json:"session_id,omitempty"`
	// At is when it happened.
	At time.Time `json:"at"`
	// Actor is agent, person or system.
	Actor queue.Actor `json:"actor"`
	// Agent is the agent's or person's name.
	Agent string `json:"agent,omitempty"`
	// Action is what was done: claim, release, resolve, verify, tool,
	// session, edit, ...
	Action string `json:"action"`
	// TaskID is the task it was done to.
	TaskID string `json:"task_id,omitempty"`
	// Outcome is ok, refused, started, a verify outcome, or error and a
	// status.
	Outcome string `json:"outcome"`
	// Detail says more.
	Detail string `json:"detail,omitempty"`
	// Branch is the git branch it was done on, when known.
	Branch string `json:"branch,omitempty"`
	// Worktree is the project folder of the worktree whose view made it,
	// when another than the one asked (the log is the repository's).
	Worktree string `json:"worktree,omitempty"`
	// Host is the machine of the clone that made it, in team mode, when
	// another than this one.
	Host string `json:"host,omitempty"`
}
