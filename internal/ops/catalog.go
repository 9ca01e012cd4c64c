package ops

import "github.com/snagdev/snag/internal/snag"

// The operations, each once, in the order of the API's reference. The
// route that carries each over HTTP is api.Routes'; who may call it is
// the route's too.
var (
	// ListTasks is one page of the queue, in queue order.
	ListTasks = op[ListQuery, TaskList]("list")
	// GetTask is one task with its data and body.
	GetTask = op[TaskRef, snag.TaskDetail]("get")
	// AddTask files a task: a person's is vetted and open, an agent's
	// unvetted in the inbox.
	AddTask = op[AddRequest, Added]("add")
	// Search is full-text search over every task and note.
	Search = op[SearchQuery, SearchResult]("search")
	// ClaimTask leases a task (or the next ready one, Ref "") to the
	// caller's session.
	ClaimTask = op[ClaimRequest, Claim]("claim")
	// Release is the holder's release, fenced by its epoch.
	Release = op[LeaseRequest, Released]("release")
	// TakeBack is a person's release of a task from whoever holds it.
	TakeBack = op[TaskMove, Released]("take_back")
	// Resolve hands the holder's task to verify.
	Resolve = op[VerifyRequest, Resolved]("resolve")
	// Accept is a person's resolve without verify (snag done).
	Accept = op[TaskMove, Moved]("accept")
	// Edit changes a task's fields for a person.
	Edit = op[EditRequest, Edited]("edit")
	// Capture makes a capture an inbox task.
	Capture = op[CaptureRequest, Captured]("capture")
	// Move is a person's promote, reject, cancel or reopen.
	Move = op[TaskMove, Moved]("move")
	// Verify checks a task now.
	Verify = op[VerifyRequest, Resolved]("verify")
	// PlanVerify says what would check a task, changing nothing (a verify
	// with dry_run).
	PlanVerify = op[VerifyRequest, VerifyPlan]("verify_plan")
	// VerifyStatus is where verify of a task stands, with its recent runs.
	VerifyStatus = op[TaskRef, snag.VerifyState]("verify_state")
	// Register registers an agent's session.
	Register = op[Registration, snag.Session]("register")
	// ListSessions is the live sessions and leases.
	ListSessions = op[None, Sessions]("sessions")
	// EndSession is a person's end of an agent's session.
	EndSession = op[EndRequest, Ended]("end_session")
	// Audit reads the audit log.
	Audit = op[AuditQuery, AuditLog]("audit")
	// Reindex rebuilds the index from the task files.
	Reindex = op[MoveRequest, Reindexed]("reindex")
	// Rescan reads every task file again now.
	Rescan = op[None, Rescanned]("rescan")
	// TeamContext is an agent's one-call screen of the team.
	TeamContext = op[ContextRequest, Context]("context")
	// ListFiles is every live file claim.
	ListFiles = op[None, FileClaims]("files")
	// ClaimFiles claims paths for the caller's session, all or nothing.
	ClaimFiles = op[FilesRequest, FilesClaimed]("claim_files")
	// ReleaseFiles releases the session's claims of paths (all of them
	// when none are named).
	ReleaseFiles = op[FilesRequest, FilesReleased]("release_files")
	// CheckFiles lists the live claims that overlap each path.
	CheckFiles = op[FilesRequest, FilesChecked]("check_files")
	// ForceReleaseFiles is a person's release of another's claim.
	ForceReleaseFiles = op[ForceReleaseRequest, FilesReleased]("force_release_files")
	// Guard is a commit guard's check of staged paths.
	Guard = op[GuardRequest, Guarded]("guard")
	// Report is an agent's progress report.
	Report = op[ReportRequest, snag.Message]("report")
	// Reports is the latest reports, newest first.
	Reports = op[MessageQuery, Messages]("reports")
	// Handoff is a note to an agent by name, and maybe a task's lease.
	Handoff = op[HandoffRequest, HandedOff]("handoff")
	// Handoffs is the latest handoffs, newest first.
	Handoffs = op[MessageQuery, Messages]("handoffs")
	// ListPlans is the plans, newest first.
	ListPlans = op[None, PlanList]("plans")
	// GetPlan is one plan with its body.
	GetPlan = op[PlanRef, PlanDetail]("plan")
	// CreatePlan writes a new plan, a draft.
	CreatePlan = op[PlanRequest, PlanDetail]("create_plan")
	// UpdatePlan changes a plan's title, body or status.
	UpdatePlan = op[PlanRequest, PlanDetail]("update_plan")
	// ListNotes is the notes of the decision graph, newest first.
	ListNotes = op[NoteQuery, NoteList]("notes")
	// GetNote is one note with its body and edges.
	GetNote = op[NoteRef, NoteDetail]("note")
	// AddNote writes a note with the next free key.
	AddNote = op[NoteRequest, NoteDetail]("add_note")
	// Link adds an edge between notes.
	Link = op[LinkRequest, NoteDetail]("link")
	// GetGraph is the decision graph.
	GetGraph = op[NoteQuery, Graph]("graph")
	// Branches is what is live and the latest branches' activity.
	Branches = op[BranchQuery, ActivityFeed]("branches")
	// ListWorktrees is the tasks' git worktrees.
	ListWorktrees = op[None, Worktrees]("worktrees")
	// PruneWorktrees removes the worktrees of finished tasks.
	PruneWorktrees = op[MoveRequest, Pruned]("prune_worktrees")
)
