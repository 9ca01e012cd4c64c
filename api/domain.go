package api

import "github.com/snagdev/snag/internal/queue"

// The wire contract names the domain's types through these aliases, so a
// program outside this module can spell every type its answers carry. The
// domain itself (internal/queue) is not importable from outside.
type (
	// Status is a task's place in the status machine (DESIGN section 4).
	Status = queue.Status
	// Trust says whether a person vetted an item: what agents and captures
	// add is unvetted until a person promotes it.
	Trust = queue.Trust
	// Severity orders a task in the queue.
	Severity = queue.Severity
	// Kind is what sort of task it is: bug, ux, layout and the rest.
	Kind = queue.Kind
	// Actor is who made a move: an agent, a person, snag itself or a
	// capture tool.
	Actor = queue.Actor
	// PlanStatus is a plan's place: draft, active, done or archived.
	PlanStatus = queue.PlanStatus
	// Viewport is the window a capture was taken in.
	Viewport = queue.Viewport
	// Box is a region of a screenshot.
	Box = queue.Box
	// TaskFile is a task file as snag reads it: its frontmatter's fields
	// and its body.
	TaskFile = queue.Task
)

// The statuses, trust tiers, severities, actors and plan statuses a
// program compares the answers' values with.
const (
	StatusInbox       = queue.StatusInbox
	StatusOpen        = queue.StatusOpen
	StatusClaimed     = queue.StatusClaimed
	StatusVerifying   = queue.StatusVerifying
	StatusNeedsReview = queue.StatusNeedsReview
	StatusResolved    = queue.StatusResolved
	StatusCancelled   = queue.StatusCancelled

	TrustVetted   = queue.TrustVetted
	TrustUnvetted = queue.TrustUnvetted

	SeverityCritical = queue.SeverityCritical
	SeverityHigh     = queue.SeverityHigh
	SeverityMedium   = queue.SeverityMedium
	SeverityLow      = queue.SeverityLow

	ActorAgent  = queue.Agent
	ActorPerson = queue.Person
	ActorSystem = queue.System
	ActorTool   = queue.Tool

	PlanDraft    = queue.PlanDraft
	PlanActive   = queue.PlanActive
	PlanDone     = queue.PlanDone
	PlanArchived = queue.PlanArchived
)
