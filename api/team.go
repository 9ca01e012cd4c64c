package api

import (
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// FileClaim is snag.FileClaim: a session's claim of a repository path,
// folder or glob.
type FileClaim = snag.FileClaim

// FilesRequest is ops.FilesRequest: the body of POST /files/claim,
// /files/release and /files/check.
type FilesRequest = ops.FilesRequest

// FilesClaimed is ops.FilesClaimed: the answer of POST /files/claim.
type FilesClaimed = ops.FilesClaimed

// FilesReleased is ops.FilesReleased: the answer of POST /files/release and
// a person's POST /files/force-release.
type FilesReleased = ops.FilesReleased

// FilesCheck is ops.FilesCheck: what a check found of one path: the live
// claims that overlap it.
type FilesCheck = ops.FilesCheck

// FilesChecked is ops.FilesChecked: the answer of POST /files/check.
type FilesChecked = ops.FilesChecked

// FileClaims is ops.FileClaims: the answer of GET /files: every live file
// claim.
type FileClaims = ops.FileClaims

// ForceReleaseRequest is ops.ForceReleaseRequest: the body of a person's
// POST /files/force-release.
type ForceReleaseRequest = ops.ForceReleaseRequest

// GuardRequest is ops.GuardRequest: the body of POST /guard: a commit's
// staged paths.
type GuardRequest = ops.GuardRequest

// Guarded is ops.Guarded: the answer of POST /guard: the staged paths
// another live agent claims exclusively; [] when the commit may go ahead.
type Guarded = ops.Guarded

// Message is snag.Message: a handoff to an agent by name, or a report of
// progress.
type Message = snag.Message

// ReportRequest is ops.ReportRequest: the body of an agent's POST /reports.
type ReportRequest = ops.ReportRequest

// Messages is ops.Messages: the answer of GET /reports and GET /handoffs,
// newest first.
type Messages = ops.Messages

// HandoffRequest is ops.HandoffRequest: the body of POST /handoffs: an
// agent's (with the session header) or a person's.
type HandoffRequest = ops.HandoffRequest

// HandedOff is ops.HandedOff: the answer of POST /handoffs.
type HandedOff = ops.HandedOff

// ContextRequest is ops.ContextRequest: the body of an agent's POST
// /context.
type ContextRequest = ops.ContextRequest

// HeldTask is ops.HeldTask: a task a session holds.
type HeldTask = ops.HeldTask

// AgentView is ops.AgentView: one live agent as the others see it.
type AgentView = ops.AgentView

// Context is ops.Context: the answer of POST /context: one agent's screen of
// the team.
type Context = ops.Context

// TeamItem is ops.TeamItem: a decision or an inbox item another clone
// published before git carried its file here: it is unvetted, and not in
// this clone's files yet.
type TeamItem = ops.TeamItem

// Plan is snag.Plan: a plan file (.snag/plans/SLUG.md) as lists show it.
type Plan = snag.Plan

// PlanList is ops.PlanList: the answer of GET /plans, newest first.
type PlanList = ops.PlanList

// PlanDetail is ops.PlanDetail: a plan with its body: GET /plans/{slug}, and
// the answer of a create or an update.
type PlanDetail = ops.PlanDetail

// PlanRequest is ops.PlanRequest: the body of POST /plans (a new draft:
// title and body) and of POST /plans/{slug} (an update: the fields given
// change).
type PlanRequest = ops.PlanRequest

// Note is snag.Note: a note (.snag/notes/N-<n> - <title>.md): a node of the
// decision graph.
type Note = snag.Note

// Link is snag.Link: an edge of the decision graph, written in the note it
// starts from.
type Link = snag.Link

// NoteList is ops.NoteList: the answer of GET /notes, newest first.
type NoteList = ops.NoteList

// NoteDetail is ops.NoteDetail: a note with its body and its edges both
// ways: GET /notes/{ref}, and the answer of POST /notes and POST /links.
type NoteDetail = ops.NoteDetail

// NoteRequest is ops.NoteRequest: the body of POST /notes: an agent's note
// (with the session header) is unvetted, and takes its branch's write lease.
type NoteRequest = ops.NoteRequest

// LinkRequest is ops.LinkRequest: the body of POST /links: an edge from one
// note to another, added to the file of the note it starts from.
type LinkRequest = ops.LinkRequest

// PlanRef is ops.PlanRef: one plan, in a route's path.
type PlanRef = ops.PlanRef

// NoteRef is ops.NoteRef: one note, in a route's path.
type NoteRef = ops.NoteRef

// BranchQuery is ops.BranchQuery: the query of GET /branches.
type BranchQuery = ops.BranchQuery

// NoteQuery is ops.NoteQuery: the query of GET /notes and GET /graph.
type NoteQuery = ops.NoteQuery

// Graph is ops.Graph: the answer of GET /graph: notes and the edges among
// them.
type Graph = ops.Graph

// TaskLease is snag.TaskLease: a live task lease in the activity.
type TaskLease = snag.TaskLease

// BranchLease is snag.BranchLease: a live advisory branch write lease.
type BranchLease = snag.BranchLease

// BranchActivity is snag.BranchActivity: what happened lately on one branch.
type BranchActivity = snag.BranchActivity

// ActivityReport is snag.ActivityReport: a branch's last report.
type ActivityReport = snag.ActivityReport

// ActivityFeed is ops.ActivityFeed: the answer of GET /branches?branches=N:
// what is live and what happened lately, by branch.
type ActivityFeed = ops.ActivityFeed

// Worktree is snag.Worktree: a task's git worktree (snag_claim with
// worktree).
type Worktree = snag.Worktree

// Worktrees is ops.Worktrees: the answer of GET /worktrees.
type Worktrees = ops.Worktrees

// Pruned is ops.Pruned: the answer of POST /worktrees/prune: the worktrees
// removed (their tasks resolved or cancelled, clean and merged) and those
// kept, with why.
type Pruned = ops.Pruned
