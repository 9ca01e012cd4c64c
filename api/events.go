package api

import (
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// Event is ops.Event: one event of GET /events, a stream of server-sent
// events (text/event-stream): its id: line, its event: line (one of the
// Kind* constants, or resync when events were missed) and its data: line,
// one JSON object, as the kind's type below writes it.
type Event = ops.Event

// EventTask is ops.EventTask: the part of an event's data that names a task:
// Key in task events, Task in lease and verify events.
type EventTask = ops.EventTask

// The types of the events of GET /events (Event.Type), each with the type
// of its data.
const (
	KindTask     = snag.KindTask
	KindProblem  = snag.KindProblem
	KindLease    = snag.KindLease
	KindSession  = snag.KindSession
	KindFiles    = snag.KindFiles
	KindHandoff  = snag.KindHandoff
	KindNote     = snag.KindNote
	KindPlan     = snag.KindPlan
	KindReport   = snag.KindReport
	KindRenumber = snag.KindRenumber
	KindRescan   = snag.KindRescan
	KindVerify   = snag.KindVerify
	KindTeam     = snag.KindTeam
)

// TaskEvent is snag.TaskEvent: the data of a task event.
type TaskEvent = snag.TaskEvent

// ProblemEvent is snag.ProblemEvent: the data of a problem event.
type ProblemEvent = snag.ProblemEvent

// LeaseEvent is snag.LeaseEvent: the data of a lease event.
type LeaseEvent = snag.LeaseEvent

// SessionEvent is snag.SessionEvent: the data of a session event.
type SessionEvent = snag.SessionEvent

// FilesEvent is snag.FilesEvent: the data of a files event.
type FilesEvent = snag.FilesEvent

// HandoffEvent is snag.HandoffEvent: the data of a handoff event.
type HandoffEvent = snag.HandoffEvent

// NoteEvent is snag.NoteEvent: the data of a note event.
type NoteEvent = snag.NoteEvent

// PlanEvent is snag.PlanEvent: the data of a plan event.
type PlanEvent = snag.PlanEvent

// ReportEvent is snag.ReportEvent: the data of a report event.
type ReportEvent = snag.ReportEvent

// RenumberEvent is snag.RenumberEvent: the data of a renumber event.
type RenumberEvent = snag.RenumberEvent

// RescanEvent is snag.RescanEvent: the data of a rescan event.
type RescanEvent = snag.RescanEvent

// VerifyEvent is snag.VerifyEvent: the data of a verify event.
type VerifyEvent = snag.VerifyEvent

// VerifyOutcome is snag.VerifyOutcome: the outcome fields of a verify
// event that decided one.
type VerifyOutcome = snag.VerifyOutcome

// TeamEvent is snag.TeamEvent: the data of a team event.
type TeamEvent = snag.TeamEvent

// Relayed is snag.Relayed: an event of another clone of a team, passed on
// with that clone's type and JSON object.
type Relayed = snag.Relayed
