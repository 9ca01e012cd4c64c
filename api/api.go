// Package api is the wire contract of snagd's HTTP API: the JSON bodies of
// every request and answer, the error body and its codes, and the query of
// GET /tasks. snagd encodes these types; the client package, the CLI and
// the MCP bridge decode them. The index's rows are not part of it: a column
// added to the index changes nothing here until a field is added on
// purpose.
//
// The doc comments of this package are the API's reference: docs/api.md is
// generated from them and from the route table in routes.go, and a test
// keeps the two the same (go test ./api -update rewrites the file).
//
// It must not import any package of snag's but queue, nor net/http.
package api

import (
	"encoding/json"
	"time"

	"github.com/snagdev/snag/internal/queue"
)

// Health is the answer of GET /health, the one route served without a
// token. A client finds its project's snagd by it: the root and the git
// common dir name the project, and the proof shows the daemon holds the
// same token as the client.
type Health struct {
	// Service is always "snagd".
	Service string `json:"service"`
	// Root is the project root snagd serves, symlinks resolved.
	Root string `json:"root"`
	// GitCommonDir is the git common dir of the root's repository, so the
	// worktrees of one repository find one snagd; empty outside git.
	GitCommonDir string `json:"git_common_dir"`
	// PID is snagd's process id.
	PID int `json:"pid"`
	// Port is the port snagd listens on, on 127.0.0.1.
	Port int `json:"port"`
	// Version is snagd's version.
	Version string `json:"version"`
	// Ready is true once the first full read of the task files is done;
	// until then every other route answers 503 starting.
	Ready bool `json:"ready"`
	// Polling is true when the filesystem gave no watches and snagd polls
	// the task folder instead.
	Polling bool `json:"polling"`
	// Counts are the index's counts, once Ready.
	Counts Counts `json:"counts"`
	// Worktree is the project root the request named (X-Snag-Worktree)
	// when this snagd serves it: through Root's view, which is the same
	// folder, or for a worktree snag made for a task, the main worktree's.
	Worktree string `json:"worktree,omitempty"`
	// Repository is the folder of what the repository's worktrees share
	// on this machine (the daemon's lock, the key sequences): set by a
	// snagd that serves every worktree of its repository.
	Repository string `json:"repository,omitempty"`
	// Worktrees are the project roots snagd has open, one per worktree.
	Worktrees []string `json:"worktrees,omitempty"`
	// Error, when set, is why snagd cannot serve the worktree asked for.
	Error string `json:"error,omitempty"`
	// Proof is the hex HMAC-SHA256 of the query's nonce under the token,
	// when GET /health?nonce=... asked for one.
	Proof string `json:"proof,omitempty"`
	// Progress counts the background work of the worktree's engine, when
	// GET /health?progress=1 asked for it, once Ready.
	Progress *Progress `json:"progress,omitempty"`
}

// Progress counts the background work snagd has done for a worktree since
// it opened; each count only grows. A test reads it before it acts and
// waits until a count has passed what it read (two more sweeps: sweeps
// at least 2 more), instead of sleeping for as long as the work takes.
type Progress struct {
	// Sweeps counts the sweeps of the sessions whose process is gone.
	Sweeps int64 `json:"sweeps"`
	// Batches counts the watcher's batches of changed files applied.
	Batches int64 `json:"batches"`
	// SettlesDue counts the second looks made due at files that read as
	// missing or broken (an editor at work).
	SettlesDue int64 `json:"settles_due"`
	// Settles counts the second looks taken, once the file had time to
	// settle, or called off: none is pending when Settles has caught up
	// with SettlesDue.
	Settles int64 `json:"settles"`
	// Reconciles counts the completed reconciles of the leases with the
	// team's coordination store (at the start, and after a rejoin).
	Reconciles int64 `json:"reconciles"`
}

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
	ID string `json:"id"`
	// Key is its alias, SNAG-12, as people type it.
	Key string `json:"key"`
	// Title is the task's title.
	Title string `json:"title"`
	// Status is where the task is: inbox, open, claimed, verifying,
	// needs_review, resolved, rejected or cancelled.
	Status queue.Status `json:"status"`
	// Trust is vetted (a person filed or promoted it) or unvetted (an
	// agent filed it; it waits in the inbox).
	Trust queue.Trust `json:"trust"`
	// Severity is critical, high, medium or low.
	Severity queue.Severity `json:"severity"`
	// Kind is bug, feature, chore or question.
	Kind queue.Kind `json:"kind"`
	// Wave orders the queue: lower waves are handed out first.
	Wave int `json:"wave"`
	// Plan is the plan the task belongs to, if any.
	Plan string `json:"plan,omitempty"`
	// Assignee is the agent or person who holds or last held it.
	Assignee string `json:"assignee,omitempty"`
	// File is the first suspect file, as path or path:line-line.
	File string `json:"file,omitempty"`
	// BlockedBy names the unresolved tasks it depends on.
	BlockedBy []string `json:"blocked_by,omitempty"`
	// Path is the task file, relative to .snag/.
	Path string `json:"path"`
	// State is ok, invalid, conflict or missing: whether the file reads
	// cleanly; Error says why when it does not.
	State string `json:"state"`
	// Error says what is wrong with the file, and the fix, when State is
	// not ok.
	Error string `json:"error,omitempty"`
	// Stale is set when the row holds the last good data of a file that no
	// longer parses.
	Stale bool `json:"stale,omitempty"`
	// Duplicate is set when another file has the same id or alias.
	Duplicate bool `json:"duplicate,omitempty"`
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

// TaskList is the answer of GET /tasks: one page of the queue, in queue
// order (wave, severity, age, id).
type TaskList struct {
	// Next continues the list after the page's last task (pass it as
	// cursor); empty at the end.
	Next string `json:"next"`
	// Tasks is the page; [] when nothing matches.
	Tasks []Task `json:"tasks"`
}

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

// SearchResult is the answer of GET /search, best match first.
type SearchResult struct {
	// Hits are the matching tasks; null when none matched.
	Hits []Hit `json:"hits"`
	// Notes are the matching notes (.snag/notes), best first; absent when
	// none matched.
	Notes []Note `json:"notes,omitempty"`
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
	Task Task `json:"task"`
	// Changed says what changed, one "field old -> new" each; empty when
	// the file said so already (nothing was written).
	Changed []string `json:"changed"`
	// Warnings say what the task now names that is not there yet.
	Warnings []string `json:"warnings,omitempty"`
}

// ClaimRequest is the body of POST /tasks/{ref}/claim and POST /claim
// (the next ready task). It needs the session header.
type ClaimRequest struct {
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
	Task *Task `json:"task"`
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
}

// LeaseRequest is the body of a holder's POST /tasks/{ref}/release (with
// the session header).
type LeaseRequest struct {
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

// AuditLog is the answer of GET /audit: entries after the given id, oldest
// first.
type AuditLog struct {
	// Entries are the entries; [] when none.
	Entries []AuditEntry `json:"entries"`
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

// LoginCode is the answer of POST /login-codes: a one-time link that logs
// a browser in to the board.
type LoginCode struct {
	// Expires is when the link stops working (10 minutes on).
	Expires time.Time `json:"expires"`
	// URL is the link.
	URL string `json:"url"`
}

// Event is one event of GET /events, a stream of server-sent events
// (text/event-stream): its id: line, its event: line (task, lease, verify,
// rescan, problem, session, or resync when events were missed) and its
// data: line, one JSON object. Task events name the task by key; lease and
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
