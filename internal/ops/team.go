package ops

import (
	"time"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

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
	Claims []snag.FileClaim `json:"claims"`
	// Renewed counts the claims that were renewals.
	Renewed int `json:"renewed,omitempty"`
	// Conflicts are the live claims in the way.
	Conflicts []snag.FileClaim `json:"conflicts,omitempty"`
	// Late are the session's claims that expired before their renewal.
	Late []snag.FileClaim `json:"late,omitempty"`
	// Message says what happened, naming every holder in the way.
	Message string `json:"message"`
}

// FilesReleased is the answer of POST /files/release and a person's POST
// /files/force-release.
type FilesReleased struct {
	// Released are the claims that ended; [] when none was held.
	Released []snag.FileClaim `json:"released"`
}

// FilesCheck is what a check found of one path: the live claims that
// overlap it.
type FilesCheck struct {
	// Path is the path checked, canonical.
	Path string `json:"path"`
	// Claims are the live claims that overlap it; [] when none.
	Claims []snag.FileClaim `json:"claims"`
}

// FilesChecked is the answer of POST /files/check.
type FilesChecked struct {
	// Checks has one entry per path, in the order asked.
	Checks []FilesCheck `json:"checks"`
}

// FileClaims is the answer of GET /files: every live file claim.
type FileClaims struct {
	// Claims are the live claims, by holder and path; [] when none.
	Claims []snag.FileClaim `json:"claims"`
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
	Messages []snag.Message `json:"messages"`
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
	Message snag.Message `json:"message"`
	// Moved is true when the task's lease went to the agent.
	Moved bool `json:"moved"`
	// Key is the task moved.
	Key string `json:"key,omitempty"`
	// Epoch is the new lease's epoch.
	Epoch int64 `json:"epoch,omitempty"`
	// Live is true when the agent has a live session now; a handoff to
	// one that has none waits for it to come back under its name.
	Live bool `json:"live"`
	// Host is the machine of the clone the agent is connected to, when
	// another than this one (team mode).
	Host string `json:"host,omitempty"`
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
	Files []snag.FileClaim `json:"files"`
	// LastReport is its latest report, if any.
	LastReport *snag.Message `json:"last_report,omitempty"`
}

// Context is the answer of POST /context: one agent's screen of the
// team. The handoffs it holds are marked seen.
type Context struct {
	// Me is the agent's session.
	Me snag.Session `json:"me"`
	// NameNote says why a name asked for was not adopted, if it was not.
	NameNote string `json:"name_note,omitempty"`
	// Tasks are the tasks it holds, with their epochs.
	Tasks []HeldTask `json:"tasks"`
	// Files are its file claims, expired ones included.
	Files []snag.FileClaim `json:"files"`
	// Ready are the next ready tasks (at most 5).
	Ready []snag.Task `json:"ready"`
	// ReadyMore is true when more tasks are ready than Ready lists.
	ReadyMore bool `json:"ready_more,omitempty"`
	// Others are the other live agents.
	Others []AgentView `json:"others"`
	// Handoffs are the oldest of those to it it had not seen (at most
	// 3), now marked seen.
	Handoffs []snag.Message `json:"handoffs"`
	// HandoffsMore counts the other unseen handoffs to it (at least):
	// the next context shows them.
	HandoffsMore int `json:"handoffs_more,omitempty"`
	// Reports are the others' latest reports, newest first.
	Reports []snag.Message `json:"reports"`
	// Detached are leases no live session holds.
	Detached []snag.Lease `json:"detached"`
	// Plans are the active plans, newest first (at most 2).
	Plans []snag.Plan `json:"plans"`
	// Decisions are the latest decision notes (at most 3).
	Decisions []snag.Note `json:"decisions"`
	// Team, in team mode, are decisions and inbox items that agents on
	// other clones added and that this clone's files do not have yet.
	Team []TeamItem `json:"team,omitempty"`
}

// TeamItem is a decision or an inbox item another clone published before
// git carried its file here: it is unvetted, and not in this clone's
// files yet.
type TeamItem struct {
	// Source is always "team".
	Source string `json:"source"`
	// Kind is note or inbox.
	Kind string `json:"kind"`
	// Key is its alias there: N-12, SNAG-40.
	Key string `json:"key"`
	// Type is a note's type, or an inbox item's kind.
	Type string `json:"type,omitempty"`
	// Title is its title.
	Title string `json:"title"`
	// Branch is the branch it was written on.
	Branch string `json:"branch,omitempty"`
	// From is the agent that wrote it.
	From string `json:"from,omitempty"`
	// Host is the machine of the clone it was written in.
	Host string `json:"host,omitempty"`
	// Created is when it was published.
	Created time.Time `json:"created"`
}

// PlanList is the answer of GET /plans, newest first.
type PlanList struct {
	// Plans are the plans; [] when none.
	Plans []snag.Plan `json:"plans"`
}

// PlanDetail is a plan with its body: GET /plans/{slug}, and the answer
// of a create or an update.
type PlanDetail struct {
	snag.Plan
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
	// Slug names the plan an update changes.
	Slug string `json:"-" path:"slug"`
	// Title is the plan's title.
	Title *string `json:"title,omitempty"`
	// Body is the plan's markdown.
	Body *string `json:"body,omitempty"`
	// Status is draft, active, done or archived (an update's).
	Status string `json:"status,omitempty"`
	// By is the person, for a person's request.
	By string `json:"by,omitempty"`
}

// PlanRef names one plan: GET /plans/{slug}.
type PlanRef struct {
	// Slug is the plan's slug.
	Slug string `json:"-" path:"slug"`
}

// NoteRef names one note, by key (N-7) or id: GET /notes/{ref}.
type NoteRef struct {
	// Ref is the note's key or id.
	Ref string `json:"-" path:"ref"`
}

// NoteList is the answer of GET /notes, newest first.
type NoteList struct {
	// Notes are the notes; [] when none.
	Notes []snag.Note `json:"notes"`
}

// NoteDetail is a note with its body and its edges both ways: GET
// /notes/{ref}, and the answer of POST /notes and POST /links.
type NoteDetail struct {
	snag.Note
	// Body is the note's markdown.
	Body string `json:"body"`
	// In are the links of other notes to it.
	In []snag.Link `json:"in,omitempty"`
}

// NoteRequest is the body of POST /notes: an agent's note (with the
// session header) is unvetted, and takes its branch's write lease.
type NoteRequest struct {
	// Title is the decision or finding in a line.
	Title string `json:"title"`
	// Body says more.
	Body string `json:"body,omitempty"`
	// Type is decision (the default), goal, option, action, observation,
	// outcome or question.
	Type string `json:"type,omitempty"`
	// Kind is the name Type had before the graph, read when Type is "".
	Kind string `json:"kind,omitempty"`
	// Task is a task the note is about.
	Task string `json:"task,omitempty"`
	// Files are files the note is about.
	Files []string `json:"files,omitempty"`
	// Links are its edges to notes that exist.
	Links []snag.Link `json:"links,omitempty"`
	// TookFrom is the key or full id of the note the idea came from: a
	// took_from link, with Why.
	TookFrom string `json:"took_from,omitempty"`
	// Why says what was taken from TookFrom.
	Why string `json:"why,omitempty"`
	// Branch is the git branch it is written on: required of an agent
	// (snag mcp sends its worktree's).
	Branch string `json:"branch,omitempty"`
	// Commit is HEAD where it is written.
	Commit string `json:"commit,omitempty"`
	// Worktree is the worktree the file goes in, when it is not snagd's
	// own: another worktree of its repository.
	Worktree string `json:"worktree,omitempty"`
	// By is the person, for a person's note.
	By string `json:"by,omitempty"`
}

// LinkRequest is the body of POST /links: an edge from one note to
// another, added to the file of the note it starts from.
type LinkRequest struct {
	// From is the note the edge starts from: its file gets the link.
	From string `json:"from"`
	// To is the note it points at, by key or full id.
	To string `json:"to"`
	// Kind is took_from, led_to, chose, rejected, blocks or relates.
	Kind string `json:"kind"`
	// Why says why, in a line.
	Why string `json:"why,omitempty"`
	// Branch is the git branch it is written on, as in NoteRequest.
	Branch string `json:"branch,omitempty"`
	// Worktree is the writer's worktree, whose copy of From gets the link.
	Worktree string `json:"worktree,omitempty"`
	// By is the person, for a person's link.
	By string `json:"by,omitempty"`
}

// NoteQuery is the query of GET /notes and GET /graph.
type NoteQuery struct {
	// Query keeps the notes a full-text search matches (q=words), best
	// first (GET /notes).
	Query string `query:"q"`
	// Type keeps one type (type=decision; kind= is read too).
	Type string `query:"type" alias:"kind"`
	// Branch keeps the notes written on one branch.
	Branch string `query:"branch"`
	// Task keeps the notes about one task (its key).
	Task string `query:"task"`
	// Limit is the most notes (limit=N), at most 200; 0: 20 (GET /graph: all).
	Limit int `query:"limit"`
	// Format draws GET /graph instead of answering JSON: dot, mermaid or
	// svg (format=svg).
	Format string `query:"format"`
}

// Encode is the query string for q, without the "?".
func (q NoteQuery) Encode() string {
	return EncodeQuery(q)
}

// BranchQuery is the query of GET /branches.
type BranchQuery struct {
	// Branches is how many of the latest branches the activity covers
	// (branches=N), from 1 to 200; 0: 20.
	Branches int `query:"branches" min:"1" max:"200"`
}

// Graph is the answer of GET /graph: notes and the edges among them.
type Graph struct {
	// Nodes are the notes, newest first.
	Nodes []snag.Note `json:"nodes"`
	// Links are the edges whose both ends are among Nodes.
	Links []snag.Link `json:"links"`
}

// ActivityFeed is the answer of GET /branches?branches=N: what is live
// and what happened lately, by branch.
type ActivityFeed struct {
	// Workspace is the project's workspace name.
	Workspace string `json:"workspace"`
	// Tasks are the live task leases, newest first.
	Tasks []snag.TaskLease `json:"tasks"`
	// Files are the live file claims.
	Files []snag.FileClaim `json:"files"`
	// Branches are the live branch write leases.
	Branches []snag.BranchLease `json:"branch_leases"`
	// Recent is the activity by branch, latest first.
	Recent []snag.BranchActivity `json:"recent"`
	// BranchesTotal is how many branches had activity in the last 7 days.
	BranchesTotal int `json:"branches_total"`
}

// Worktrees is the answer of GET /worktrees.
type Worktrees struct {
	// Worktrees are the task worktrees; [] when none.
	Worktrees []snag.Worktree `json:"worktrees"`
}

// Pruned is the answer of POST /worktrees/prune: the worktrees removed
// (their tasks resolved or cancelled, clean and merged) and those kept,
// with why.
type Pruned struct {
	// Removed are the worktrees removed; [] when none.
	Removed []snag.Worktree `json:"removed"`
	// Kept are the worktrees left; [] when none.
	Kept []snag.Worktree `json:"kept"`
	// Why says, for each kept one in order, why it stays.
	Why []string `json:"why"`
}
