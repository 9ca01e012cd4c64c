package snag

import (
	"encoding/json"

	"github.com/snagdev/snag/internal/queue"
)

// Event is one change snagd announces on GET /events: the event's data,
// a JSON object, whose kind is the event's type (its event: line). Each
// kind is one struct below; a field left out of the JSON (omitempty, or a
// nil pointer) is one that events of that kind do not all carry. A pointer
// field is one whose zero value is news in the events that carry it (a
// rescan that added 0 files), and absent in the others.
type Event interface {
	// Kind is the event's type: task, lease, session, files, handoff,
	// note, plan, report, renumber, problem, rescan, verify or team; an
	// event relayed from another clone keeps that clone's type.
	Kind() string
}

// The event kinds, as Event.Kind names them: each event's type on
// GET /events, and the struct its data is. Events relayed from another
// clone of a team (Relayed) keep that clone's types, among them clone and
// the messages' kinds.
const (
	// KindTask (TaskEvent): a task's file was added, changed, removed,
	// renamed or merged, or snag moved, edited or added a task.
	KindTask = "task"
	// KindProblem (ProblemEvent): a task file does not parse.
	KindProblem = "problem"
	// KindLease (LeaseEvent): a lease was granted, released or ended, or
	// this clone's leases were given up or reconciled with the team's.
	KindLease = "lease"
	// KindSession (SessionEvent): a session started, was renamed or ended.
	KindSession = "session"
	// KindFiles (FilesEvent): file claims were made or released.
	KindFiles = "files"
	// KindHandoff (HandoffEvent): an agent handed off to another.
	KindHandoff = "handoff"
	// KindNote (NoteEvent): a note was written or linked, or a checkout
	// brought notes.
	KindNote = "note"
	// KindPlan (PlanEvent): a plan was created or its status changed.
	KindPlan = "plan"
	// KindReport (ReportEvent): an agent sent a report.
	KindReport = "report"
	// KindRenumber (RenumberEvent): a task got a new key, because another
	// task had its key.
	KindRenumber = "renumber"
	// KindRescan (RescanEvent): a full scan of tasks/ changed the index,
	// or the index was rebuilt.
	KindRescan = "rescan"
	// KindVerify (VerifyEvent): a verify run started or an outcome was
	// decided.
	KindVerify = "verify"
	// KindTeam (TeamEvent): another clone's events may have been missed.
	KindTeam = "team"
)

// TaskEvent is a change to a task: its file was added, changed, removed,
// renamed or merged (Path, with Added and Removed), or snag moved or
// edited it (Key and Status).
type TaskEvent struct {
	// Path is the task file, relative to the project root, when the event
	// is of a file.
	Path string `json:"path,omitempty"`
	// Key is the task's alias, when snag moved, edited or added it.
	Key string `json:"key,omitempty"`
	// Status is the task's status after a move or edit.
	Status queue.Status `json:"status,omitempty"`
	// Added is true when the file is new to the index; set in events of
	// a file read, an add, a rename and a merge.
	Added *bool `json:"added,omitempty"`
	// Removed is true when the file is gone from the index; set in events
	// of a file read, a rename and a merge.
	Removed *bool `json:"removed,omitempty"`
	// Renamed is the file's new path, when the task was renamed.
	Renamed string `json:"renamed,omitempty"`
	// Merged is true when a person's save was merged into snag's rewrite.
	Merged bool `json:"merged,omitempty"`
	// Recovered is where a save that could not be merged was kept aside,
	// relative to the project root.
	Recovered string `json:"recovered,omitempty"`
	// Edited is true when a task's fields were edited through snag.
	Edited bool `json:"edited,omitempty"`
}

// Kind is "task".
func (TaskEvent) Kind() string { return KindTask }

// ProblemEvent is a task file that was read and does not parse.
type ProblemEvent struct {
	// Path is the task file, relative to the project root.
	Path string `json:"path"`
	// Added is true when the file is new to the index.
	Added bool `json:"added"`
	// Removed is true when the file is gone from the index.
	Removed bool `json:"removed"`
	// Error says what is wrong with the file.
	Error string `json:"error"`
}

// Kind is "problem".
func (ProblemEvent) Kind() string { return KindProblem }

// LeaseEvent is a lease granted, released or ended, or this clone's
// leases given up or reconciled with the team's.
type LeaseEvent struct {
	// Task is the task's alias, when the event is of one lease.
	Task string `json:"task,omitempty"`
	// Holder is the agent granted the lease.
	Holder string `json:"holder,omitempty"`
	// Epoch is the granted lease's epoch.
	Epoch int64 `json:"epoch,omitempty"`
	// Handoff is true when the lease came with a handoff.
	Handoff bool `json:"handoff,omitempty"`
	// Action is release or resolve, when the holder gave the task back
	// or resolved it.
	Action queue.Action `json:"action,omitempty"`
	// Status is the task's status after Action.
	Status queue.Status `json:"status,omitempty"`
	// Ended is true when snag, a person or the team ended the lease.
	Ended bool `json:"ended,omitempty"`
	// Reason says why the lease ended or the leases were given up.
	Reason string `json:"reason,omitempty"`
	// GivenUp is how many leases this clone gave up, when it lost the
	// coordination store.
	GivenUp *int `json:"given_up,omitempty"`
	// Reconciled is true when leases were released in a reconcile with
	// the coordination store.
	Reconciled bool `json:"reconciled,omitempty"`
	// Released is how many leases the reconcile released.
	Released int `json:"released,omitempty"`
	// Source is "team" when the team link ended the lease.
	Source string `json:"source,omitempty"`
}

// Kind is "lease".
func (LeaseEvent) Kind() string { return KindLease }

// SessionEvent is a session started, renamed or ended.
type SessionEvent struct {
	// ID is the session's id.
	ID int64 `json:"id"`
	// Name is the session's name, when it started or was renamed.
	Name string `json:"name,omitempty"`
	// Was is the name before a rename.
	Was string `json:"was,omitempty"`
	// Started is true when the session started.
	Started bool `json:"started,omitempty"`
	// Ended is true when the session ended.
	Ended bool `json:"ended,omitempty"`
	// Reason says why the session ended.
	Reason string `json:"reason,omitempty"`
	// Released is how many tasks went back to the queue when it ended.
	Released *int `json:"released,omitempty"`
}

// Kind is "session".
func (SessionEvent) Kind() string { return KindSession }

// FilesEvent is file claims made or released.
type FilesEvent struct {
	// Holder is the agent that claimed or released.
	Holder string `json:"holder,omitempty"`
	// Claimed is the paths claimed.
	Claimed []string `json:"claimed,omitempty"`
	// Released is the paths released.
	Released []string `json:"released,omitempty"`
	// By is the person who freed a path from whoever claimed it.
	By string `json:"by,omitempty"`
}

// Kind is "files".
func (FilesEvent) Kind() string { return KindFiles }

// HandoffEvent is a handoff sent from one agent to another.
type HandoffEvent struct {
	// From is the agent or person who handed off.
	From string `json:"from"`
	// To is the addressee.
	To string `json:"to"`
	// Title is the handoff's title.
	Title string `json:"title"`
	// Task is the alias of the task handed over with its lease, if any.
	Task string `json:"task,omitempty"`
}

// Kind is "handoff".
func (HandoffEvent) Kind() string { return KindHandoff }

// NoteEvent is a note written, a link added, or notes a checkout brought.
type NoteEvent struct {
	// Note is the note's alias (the link's source for a link).
	Note string `json:"note,omitempty"`
	// Type is the type of a note written.
	Type string `json:"type,omitempty"`
	// Branch is the git branch a note was written on (empty outside git).
	Branch *string `json:"branch,omitempty"`
	// Link is the alias a link added points to.
	Link string `json:"link,omitempty"`
	// LinkKind is the link's kind.
	LinkKind string `json:"kind,omitempty"`
	// By is who wrote the note or the link.
	By string `json:"by,omitempty"`
	// Changed is how many notes a checkout or pull changed.
	Changed int `json:"changed,omitempty"`
}

// Kind is "note".
func (NoteEvent) Kind() string { return KindNote }

// PlanEvent is a plan created or its status changed.
type PlanEvent struct {
	// Plan is the plan's slug.
	Plan string `json:"plan"`
	// Created is true when the plan is new.
	Created bool `json:"created,omitempty"`
	// Status is the plan's status after a change.
	Status queue.PlanStatus `json:"status,omitempty"`
}

// Kind is "plan".
func (PlanEvent) Kind() string { return KindPlan }

// ReportEvent is a report an agent sent.
type ReportEvent struct {
	// From is the agent reporting.
	From string `json:"from"`
	// Task is the alias of the task it is about; empty when none.
	Task string `json:"task"`
	// Message is the report.
	Message string `json:"message"`
}

// Kind is "report".
func (ReportEvent) Kind() string { return KindReport }

// RenumberEvent is a task given a new key because another task had its
// key.
type RenumberEvent struct {
	// Task is the task's new alias.
	Task string `json:"task"`
	// Was is the alias it had.
	Was string `json:"was"`
	// ID is the task's id, unchanged.
	ID string `json:"id"`
	// KeptBy is the id of the task that keeps the key.
	KeptBy string `json:"kept_by"`
}

// Kind is "renumber".
func (RenumberEvent) Kind() string { return KindRenumber }

// RescanEvent is a full scan of tasks/ that changed the index, or a
// reindex.
type RescanEvent struct {
	// Reasons says why the scan ran (reindex for a reindex).
	Reasons []string `json:"reasons"`
	// Files is how many task files the scan saw.
	Files int `json:"files"`
	// Added is how many rows the scan added; not set for a reindex.
	Added *int `json:"added,omitempty"`
	// Updated is how many rows' content changed; not set for a reindex.
	Updated *int `json:"updated,omitempty"`
	// Removed is how many rows' files are gone; not set for a reindex.
	Removed *int `json:"removed,omitempty"`
}

// Kind is "rescan".
func (RescanEvent) Kind() string { return KindRescan }

// VerifyEvent is a verify run started, or an outcome decided.
type VerifyEvent struct {
	// Task is the task's alias.
	Task string `json:"task"`
	// Run is the run's id; not set when nothing ran.
	Run int64 `json:"run,omitempty"`
	// Verifier is command or browser, when the run started.
	Verifier string `json:"verifier,omitempty"`
	// Started is true when the run started.
	Started bool `json:"started,omitempty"`
	// VerifyOutcome is set when an outcome was decided.
	*VerifyOutcome
}

// VerifyOutcome is the outcome a verify event announces, and what it did.
type VerifyOutcome struct {
	// Outcome is the outcome (the Outcome* constants).
	Outcome string `json:"outcome"`
	// Reason says why the outcome is what it is.
	Reason string `json:"reason"`
	// Status is the task's status after the outcome; empty when it was
	// not applied.
	Status queue.Status `json:"status"`
	// Applied is whether the outcome moved the task (false when the task
	// had moved on meanwhile).
	Applied bool `json:"applied"`
}

// Kind is "verify".
func (VerifyEvent) Kind() string { return KindVerify }

// TeamEvent says another clone's events may have been missed: a reader
// reads again what it shows.
type TeamEvent struct {
	// Resync is always true.
	Resync bool `json:"resync"`
	// Source is always "team".
	Source string `json:"source"`
}

// Kind is "team".
func (TeamEvent) Kind() string { return KindTeam }

// Relayed is an event of another clone of the team, passed on as that
// clone's coordination store announced it: its type and its JSON object
// (the store's own words, which the kinds above do not all have), with
// source "team", the clone's host and branch added.
type Relayed struct {
	// Type is the event's type on the other clone.
	Type string
	// Data is the event's JSON object.
	Data map[string]any
}

// Kind is the relayed event's type.
func (r Relayed) Kind() string { return r.Type }

// MarshalJSON writes Data alone.
func (r Relayed) MarshalJSON() ([]byte, error) { return json.Marshal(r.Data) }

// TaskOf is the alias of the task ev names, or "": the key of a task
// event, the task of the kinds that carry one.
func TaskOf(ev Event) string {
	switch ev := ev.(type) {
	case TaskEvent:
		return ev.Key
	case LeaseEvent:
		return ev.Task
	case HandoffEvent:
		return ev.Task
	case ReportEvent:
		return ev.Task
	case RenumberEvent:
		return ev.Task
	case VerifyEvent:
		return ev.Task
	case Relayed:
		if key, _ := ev.Data["key"].(string); key != "" {
			return key
		}
		task, _ := ev.Data["task"].(string)
		return task
	}
	return ""
}
