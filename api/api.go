// Package api is the wire contract of snagd's HTTP API: the JSON bodies of
// every request and answer, the error body and its codes, the headers, and
// the route table. snagd encodes these types; the client package, the CLI
// and the MCP bridge decode them. The bodies are declared once, inside the
// module: the domain's values in internal/snag, the operations' requests
// and answers in internal/ops; this package names each through an alias,
// so a program outside the module spells them api.Task, api.ClaimRequest.
// It declares itself only what is snagd's as a server: Health, Error, the
// routes, the board's login codes and the extension's pairing.
//
// The doc comments of this package and of those two are the API's
// reference: docs/api.md is generated from them and from the route table in
// routes.go, and a test keeps the two the same (go test ./api -update
// rewrites the file).
//
// It must not import any package of snag's but queue, snag and ops, nor
// net/http.
package api

import (
	"time"

	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
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
	// IdleChecks counts the checks snagd made, with --exit-idle, of
	// whether it has been idle that long (one a second); each is counted
	// as it begins, so a check counted after a moment looked after it.
	IdleChecks int64 `json:"idle_checks"`
}

// Counts is snag.Counts: are the number of task rows in the index, and of
// those with a problem (a file that does not parse, or a duplicate id).
type Counts = snag.Counts

// Task is snag.Task: a task as lists show it: one row of the queue.
type Task = snag.Task

// The states of a task row (Task.State).
const (
	StateOK       = snag.StateOK
	StateInvalid  = snag.StateInvalid
	StateConflict = snag.StateConflict
	StateMissing  = snag.StateMissing
)

// TaskList is ops.TaskList: the answer of GET /tasks: one page of the queue,
// in queue order (wave, severity, age, id).
type TaskList = ops.TaskList

// TaskDetail is snag.TaskDetail: the answer of GET /tasks/{ref}: one task
// with its data and body.
type TaskDetail = snag.TaskDetail

// Hit is snag.Hit: one answer of a search: a task and the text that matched,
// with the matched words in [brackets].
type Hit = snag.Hit

// SearchResult is ops.SearchResult: the answer of GET /search, best match
// first.
type SearchResult = ops.SearchResult

// AddRequest is ops.AddRequest: the body of POST /tasks.
type AddRequest = ops.AddRequest

// Added is ops.Added: the answer of POST /tasks (201).
type Added = ops.Added

// MoveRequest is ops.MoveRequest: the body of a person's move: POST
// /tasks/{ref}/{action} (promote, reject, cancel, reopen), POST
// /tasks/{ref}/accept, a person's POST /tasks/{ref}/release, POST /reindex
// and POST /login-codes.
type MoveRequest = ops.MoveRequest

// Moved is ops.Moved: the answer of a person's move (promote, reject,
// cancel, reopen, accept).
type Moved = ops.Moved

// EditRequest is ops.EditRequest: the body of POST /tasks/{ref}/edit: a
// person's change of a task's fields (snag edit, snag dep, the board's edit
// form).
type EditRequest = ops.EditRequest

// Edited is ops.Edited: the answer of POST /tasks/{ref}/edit.
type Edited = ops.Edited

// ClaimRequest is ops.ClaimRequest: the body of POST /tasks/{ref}/claim and
// POST /claim (the next ready task).
type ClaimRequest = ops.ClaimRequest

// Claim is ops.Claim: the answer of a claim.
type Claim = ops.Claim

// TaskRef is ops.TaskRef: one task, by id or alias, in a route's path.
type TaskRef = ops.TaskRef

// TaskMove is ops.TaskMove: a person's move of one task.
type TaskMove = ops.TaskMove

// LeaseRequest is ops.LeaseRequest: the body of a holder's POST
// /tasks/{ref}/release (with the session header).
type LeaseRequest = ops.LeaseRequest

// Released is ops.Released: the answer of a release, a holder's or a
// person's.
type Released = ops.Released

// The codes of a verify dry run and of a resolve (VerifyPlan.Code,
// Resolved.Code).
const (
	VerifyOK            = ops.VerifyOK
	VerifyNoCaptureURL  = ops.VerifyNoCaptureURL
	VerifyDisabled      = ops.VerifyDisabled
	VerifyUnavailable   = ops.VerifyUnavailable
	VerifyNeedsApproval = ops.VerifyNeedsApproval
)

// The outcomes of a verify run (VerifyRun.Outcome, VerifyState.Outcome).
const (
	OutcomePass          = snag.OutcomePass
	OutcomeFail          = snag.OutcomeFail
	OutcomeInconclusive  = snag.OutcomeInconclusive
	OutcomeNeedsApproval = snag.OutcomeNeedsApproval
	OutcomeUnavailable   = snag.OutcomeUnavailable
	OutcomeInterrupted   = snag.OutcomeInterrupted
)

// AuditEntry is snag.AuditEntry: one line of the audit log.
type AuditEntry = snag.AuditEntry

// AuditLog is ops.AuditLog: the answer of GET /audit: entries after the
// given id, oldest first.
type AuditLog = ops.AuditLog

// Reindexed is ops.Reindexed: the answer of POST /reindex: the index was
// rebuilt from the task files (live state kept).
type Reindexed = ops.Reindexed

// Rescanned is ops.Rescanned: the answer of POST /rescan: a full read of the
// task files is done.
type Rescanned = ops.Rescanned

// LoginCode is the answer of POST /login-codes: a one-time link that logs
// a browser in to the board.
type LoginCode struct {
	// Expires is when the link stops working (10 minutes on).
	Expires time.Time `json:"expires"`
	// URL is the link.
	URL string `json:"url"`
}
