package api

import (
	"net/url"
	"strconv"
	"time"

	"github.com/snagdev/snag/queue"
)

// FileClaim is a session's claim of a repository path, folder or glob.
type FileClaim struct {
	// ID numbers the claim.
	ID int64 `json:"id"`
	// Path is the claimed path, folder or glob, canonical and relative to
	// the repository's top folder.
	Path string `json:"path"`
	// SessionID is the holder's session.
	SessionID int64 `json:"session_id"`
	// Holder is the holder's name.
	Holder string `json:"holder"`
	// TaskID is the task the claim is for, when one was named.
	TaskID string `json:"task_id,omitempty"`
	// Exclusive claims keep every other claim off their paths; shared ones
	// only exclusive claims.
	Exclusive bool `json:"exclusive"`
	// Acquired is when it was first claimed.
	Acquired time.Time `json:"acquired"`
	// Expires is when it ends unless renewed.
	Expires time.Time `json:"expires"`
}

// FilesRequest is the body of POST /files/claim, /files/release and
// /files/check.
type FilesRequest struct {
	// Paths are repository-relative paths, folders or globs (web/**/*.ts).
	// A release with none releases every claim the session holds.
	Paths []string `json:"paths,omitempty"`
	// Task is the task a claim is for (an id or alias), optional.
	Task string `json:"task,omitempty"`
	// TTLSec is how long a claim lasts unless renewed; 0 for 900.
	TTLSec int `json:"ttl_sec,omitempty"`
	// Shared asks for a shared claim, which other shared claims may
	// overlap; the default is exclusive.
	Shared bool `json:"shared,omitempty"`
}

// FilesClaimed is the answer of POST /files/claim. A claim is all or
// nothing: Granted with the claims made or renewed, or not granted with
// the other agents' claims in the way (Conflicts) or the session's own
// that expired before the renewal came (Late), and Message naming them.
type FilesClaimed struct {
	// Granted is true when every path was claimed.
	Granted bool `json:"granted"`
	// Claims are the claims made or renewed.
	Claims []FileClaim `json:"claims"`
	// Renewed counts the claims that were renewals.
	Renewed int `json:"renewed,omitempty"`
	// Conflicts are the live claims in the way.
	Conflicts []FileClaim `json:"conflicts,omitempty"`
	// Late are the session's claims that expired before their renewal.
	Late []FileClaim `json:"late,omitempty"`
	// Message says what happened, naming every holder in the way.
	Message string `json:"message"`
}

// FilesReleased is the answer of POST /files/release and a person's POST
// /files/force-release.
type FilesReleased struct {
	// Released are the claims that ended; [] when none was held.
	Released []FileClaim `json:"released"`
}

// FilesCheck is what a check found of one path: the live claims that
// overlap it.
type FilesCheck struct {
	// Path is the path checked, canonical.
	Path string `json:"path"`
	// Claims are the live claims that overlap it; [] when none.
	Claims []FileClaim `json:"claims"`
}

// FilesChecked is the answer of POST /files/check.
type FilesChecked struct {
	// Checks has one entry per path, in the order asked.
	Checks []FilesCheck `json:"checks"`
}

// FileClaims is the answer of GET /files: every live file claim.
type FileClaims struct {
	// Claims are the live claims, by holder and path; [] when none.
	Claims []FileClaim `json:"claims"`
}

// ForceReleaseRequest is the body of a person's POST /files/force-release.
type ForceReleaseRequest struct {
	// Path is the claim's path, folder or glob, as GET /files lists it.
	Path string `json:"path"`
	// By is the person, for the audit log.
	By string `json:"by,omitempty"`
	// Reason says why; it is required.
	Reason string `json:"reason"`
}

// GuardRequest is the body of POST /guard: a commit's staged paths.
type GuardRequest struct {
	// Committer is the agent committing (SNAG_AGENT), or "" for a person;
	// its own claims do not stop it.
	Committer string `json:"committer,omitempty"`
	// Paths are the staged paths, relative to the repository's top folder.
	Paths []string `json:"paths"`
}

// Guarded is the answer of POST /guard: the staged paths another live
// agent claims exclusively; [] when the commit may go ahead.
type Guarded struct {
	// Blocked are the staged paths under another agent's claim.
	Blocked []FilesCheck `json:"blocked"`
}

// Message is a handoff to an agent by name, or a report of progress.
type Message struct {
	// ID numbers the message.
	ID int64 `json:"id"`
	// Created is when it was left.
	Created time.Time `json:"created"`
	// Kind is handoff or report.
	Kind string `json:"kind"`
	// From is the agent's or person's name.
	From string `json:"from"`
	// To is a handoff's addressee.
	To string `json:"to,omitempty"`
	// TaskID is the task it is about.
	TaskID string `json:"task_id,omitempty"`
	// Title is a handoff's title.
	Title string `json:"title,omitempty"`
	// Body is a handoff's body, or a report's message.
	Body string `json:"body,omitempty"`
	// Detail is a report's detail.
	Detail string `json:"detail,omitempty"`
	// Seen is when a handoff was shown to its addressee.
	Seen time.Time `json:"seen,omitzero"`
}

// ReportRequest is the body of an agent's POST /reports.
type ReportRequest struct {
	// Message says in a sentence what was done or found.
	Message string `json:"message"`
	// Task is the task it is about, optional.
	Task string `json:"task,omitempty"`
	// Detail says more, optional.
	Detail string `json:"detail,omitempty"`
}

// Messages is the answer of GET /reports and GET /handoffs, newest first.
type Messages struct {
	// Messages are the messages; [] when none.
	Messages []Message `json:"messages"`
}

// HandoffRequest is the body of POST /handoffs: an agent's (with the
// session header) or a person's.
type HandoffRequest struct {
	// To is the agent's name.
	To string `json:"to"`
	// Title says what the agent is to do.
	Title string `json:"title"`
	// Body says more, optional.
	Body string `json:"body,omitempty"`
	// Task, when set, moves that task's lease to the agent.
	Task string `json:"task,omitempty"`
	// By is the person, for a person's handoff.
	By string `json:"by,omitempty"`
}

// HandedOff is the answer of POST /handoffs.
type HandedOff struct {
	// Message is the handoff as left.
	Message Message `json:"message"`
	// Moved is true when the task's lease went to the agent.
	Moved bool `json:"moved"`
	// Key is the task moved.
	Key string `json:"key,omitempty"`
	// Epoch is the new lease's epoch.
	Epoch int64 `json:"epoch,omitempty"`
	// Live is true when the agent has a live session now; a handoff to
	// one that has none waits for it to come back under its name.
	Live bool `json:"live"`
}

// ContextRequest is the body of an agent's POST /context.
type ContextRequest struct {
	// Name is the identity to adopt (first call); optional.
	Name string `json:"name,omitempty"`
}

// HeldTask is a task a session holds.
type HeldTask struct {
	// Key is the task's alias.
	Key string `json:"key"`
	// ID is the task's ULID.
	ID string `json:"id"`
	// Title is the task's title.
	Title string `json:"title"`
	// Status is claimed or verifying.
	Status queue.Status `json:"status"`
	// Trust is the task's trust.
	Trust queue.Trust `json:"trust"`
	// Epoch fences the lease.
	Epoch int64 `json:"epoch"`
}

// AgentView is one live agent as the others see it.
type AgentView struct {
	// Name is the agent's name.
	Name string `json:"name"`
	// Client is its MCP client.
	Client string `json:"client,omitempty"`
	// Tasks are the tasks it holds.
	Tasks []HeldTask `json:"tasks"`
	// Files are its live file claims.
	Files []FileClaim `json:"files"`
	// LastReport is its latest report, if any.
	LastReport *Message `json:"last_report,omitempty"`
}

// Context is the answer of POST /context: one agent's screen of the
// team. The handoffs it holds are marked seen.
type Context struct {
	// Me is the agent's session.
	Me Session `json:"me"`
	// NameNote says why a name asked for was not adopted, if it was not.
	NameNote string `json:"name_note,omitempty"`
	// Tasks are the tasks it holds, with their epochs.
	Tasks []HeldTask `json:"tasks"`
	// Files are its file claims, expired ones included.
	Files []FileClaim `json:"files"`
	// Ready are the next ready tasks (at most 5).
	Ready []Task `json:"ready"`
	// ReadyMore is true when more tasks are ready than Ready lists.
	ReadyMore bool `json:"ready_more,omitempty"`
	// Others are the other live agents.
	Others []AgentView `json:"others"`
	// Handoffs are those to it it had not seen.
	Handoffs []Message `json:"handoffs"`
	// Reports are the others' latest reports, newest first.
	Reports []Message `json:"reports"`
	// Detached are leases no live session holds.
	Detached []Lease `json:"detached"`
	// Plans are the active plans, newest first (at most 2).
	Plans []Plan `json:"plans"`
	// Decisions are the latest decision notes (at most 3).
	Decisions []Note `json:"decisions"`
}

// Plan is a plan file (.snag/plans/SLUG.md) as lists show it.
type Plan struct {
	// Slug names the plan: its file's name, and what a task's plan: says.
	Slug string `json:"slug"`
	// Title is the plan's title.
	Title string `json:"title,omitempty"`
	// Status is draft, active, done or archived.
	Status queue.PlanStatus `json:"status,omitempty"`
	// Trust is vetted (a person wrote or activated it) or unvetted.
	Trust queue.Trust `json:"trust,omitempty"`
	// Author is the agent that wrote an unvetted plan.
	Author string `json:"author,omitempty"`
	// Created is when it was written.
	Created time.Time `json:"created,omitzero"`
	// Updated is when snag last changed it.
	Updated time.Time `json:"updated,omitzero"`
	// Tasks counts the plan's tasks by status.
	Tasks map[string]int `json:"tasks,omitempty"`
	// Problem says why the file cannot be read, for one that does not
	// parse.
	Problem string `json:"problem,omitempty"`
}

// PlanList is the answer of GET /plans, newest first.
type PlanList struct {
	// Plans are the plans; [] when none.
	Plans []Plan `json:"plans"`
}

// PlanDetail is a plan with its body: GET /plans/{slug}, and the answer
// of a create or an update.
type PlanDetail struct {
	Plan
	// Body is the plan's markdown.
	Body string `json:"body"`
	// File is the plan's file, relative to the project root.
	File string `json:"file"`
}

// PlanRequest is the body of POST /plans (a new draft: title and body) and
// of POST /plans/{slug} (an update: the fields given change). An agent's
// request (with the session header) writes an unvetted draft and may not
// make a plan active or done.
type PlanRequest struct {
	// Title is the plan's title.
	Title *string `json:"title,omitempty"`
	// Body is the plan's markdown.
	Body *string `json:"body,omitempty"`
	// Status is draft, active, done or archived (an update's).
	Status string `json:"status,omitempty"`
	// By is the person, for a person's request.
	By string `json:"by,omitempty"`
}

// Note is a note (.snag/notes/N-<n> - <title>.md): a decision, an
// observation or an action.
type Note struct {
	// Key is N-<n>.
	Key string `json:"key"`
	// ID is the note's id.
	ID string `json:"id,omitempty"`
	// Title is the note's title.
	Title string `json:"title"`
	// Kind is decision, observation or action.
	Kind string `json:"kind"`
	// Trust is vetted (a person wrote it) or unvetted (an agent did).
	Trust queue.Trust `json:"trust"`
	// Author is the agent that wrote an unvetted note.
	Author string `json:"author,omitempty"`
	// Created is when it was written.
	Created time.Time `json:"created,omitzero"`
	// Tasks are the tasks it is about.
	Tasks []string `json:"tasks,omitempty"`
	// Files are the files it is about.
	Files []string `json:"files,omitempty"`
	// File is the note's file, relative to the project root.
	File string `json:"file"`
	// Snippet is the text a search matched, words in [brackets].
	Snippet string `json:"snippet,omitempty"`
}

// NoteList is the answer of GET /notes, newest first.
type NoteList struct {
	// Notes are the notes; [] when none.
	Notes []Note `json:"notes"`
}

// NoteDetail is a note with its body: GET /notes/{ref}, and the answer of
// POST /notes.
type NoteDetail struct {
	Note
	// Body is the note's markdown.
	Body string `json:"body"`
}

// NoteRequest is the body of POST /notes: an agent's note (with the
// session header) is unvetted.
type NoteRequest struct {
	// Title is the decision or finding in a line.
	Title string `json:"title"`
	// Body says more.
	Body string `json:"body,omitempty"`
	// Kind is decision (the default), observation or action.
	Kind string `json:"kind,omitempty"`
	// Task is a task the note is about.
	Task string `json:"task,omitempty"`
	// Files are files the note is about.
	Files []string `json:"files,omitempty"`
	// By is the person, for a person's note.
	By string `json:"by,omitempty"`
}

// NoteQuery is the query of GET /notes.
type NoteQuery struct {
	// Kind keeps one kind (kind=decision).
	Kind string
	// Limit is the most notes (limit=N), at most 200; 0: 20.
	Limit int
}

// Encode is the query string for q, without the "?".
func (q NoteQuery) Encode() string {
	v := url.Values{}
	if q.Kind != "" {
		v.Set("kind", q.Kind)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v.Encode()
}

// Worktree is a task's git worktree (snag_claim with worktree).
type Worktree struct {
	// Path is the worktree's folder.
	Path string `json:"path"`
	// Branch is its branch, snag/<key>.
	Branch string `json:"branch"`
	// Key is the task's alias.
	Key string `json:"key"`
	// Status is the task's status, "" when no task has the key.
	Status queue.Status `json:"status,omitempty"`
	// Merged is true when the branch is merged into the base.
	Merged bool `json:"merged"`
	// Clean is true when the worktree has no change and no untracked file.
	Clean bool `json:"clean"`
}

// Worktrees is the answer of GET /worktrees.
type Worktrees struct {
	// Worktrees are the task worktrees; [] when none.
	Worktrees []Worktree `json:"worktrees"`
}

// Pruned is the answer of POST /worktrees/prune: the worktrees removed
// (their tasks resolved or cancelled, clean and merged) and those kept,
// with why.
type Pruned struct {
	// Removed are the worktrees removed; [] when none.
	Removed []Worktree `json:"removed"`
	// Kept are the worktrees left; [] when none.
	Kept []Worktree `json:"kept"`
	// Why says, for each kept one in order, why it stays.
	Why []string `json:"why"`
}
