package queue

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Action is a move in the status machine.
type Action string

// The actions. Agents list, get, claim, release, resolve and add; people
// promote, reject, cancel, reopen and accept; verify passes, fails or
// declares a check inconclusive.
const (
	ActPromote      Action = "promote"      // inbox -> open (vetting it)
	ActReject       Action = "reject"       // inbox -> cancelled
	ActClaim        Action = "claim"        // open -> claimed
	ActRelease      Action = "release"      // claimed|verifying -> open
	ActResolve      Action = "resolve"      // claimed -> verifying; a person's needs_review -> verifying checks again
	ActPass         Action = "pass"         // verifying -> resolved, verified
	ActFail         Action = "fail"         // verifying -> claimed (same holder)
	ActInconclusive Action = "inconclusive" // verifying -> needs_review
	ActSkipVerify   Action = "skip_verify"  // verifying -> resolved, unverified (verify disabled)
	ActAccept       Action = "accept"       // open|claimed|verifying|needs_review -> resolved, unverified, by a person (snag done)
	ActCancel       Action = "cancel"       // any live status -> cancelled
	ActReopen       Action = "reopen"       // needs_review|resolved|cancelled -> open
)

// Actor is who makes a move.
type Actor string

// The actors.
const (
	Agent  Actor = "agent"  // an agent, through MCP
	Person Actor = "person" // a person: CLI, board, editor
	System Actor = "system" // snag itself: verify, and the sweep that releases a dead agent's leases
	Tool   Actor = "tool"   // a capture tool for a person: snag capture, the browser extension; what it adds is unvetted
)

type move struct {
	from   Status
	action Action
	to     Status
	actors []Actor
}

// moves is the whole status machine (DESIGN section 4).
var moves = []move{
	{StatusInbox, ActPromote, StatusOpen, []Actor{Person}},
	{StatusInbox, ActReject, StatusCancelled, []Actor{Person}},
	{StatusInbox, ActCancel, StatusCancelled, []Actor{Person}},

	{StatusOpen, ActClaim, StatusClaimed, []Actor{Agent, Person}},
	{StatusOpen, ActAccept, StatusResolved, []Actor{Person}},
	{StatusOpen, ActCancel, StatusCancelled, []Actor{Person}},

	{StatusClaimed, ActRelease, StatusOpen, []Actor{Agent, Person, System}},
	{StatusClaimed, ActResolve, StatusVerifying, []Actor{Agent, Person}},
	{StatusClaimed, ActAccept, StatusResolved, []Actor{Person}},
	{StatusClaimed, ActCancel, StatusCancelled, []Actor{Person}},

	{StatusVerifying, ActPass, StatusResolved, []Actor{System}},
	{StatusVerifying, ActFail, StatusClaimed, []Actor{System}},
	{StatusVerifying, ActInconclusive, StatusNeedsReview, []Actor{System}},
	{StatusVerifying, ActSkipVerify, StatusResolved, []Actor{System}},
	{StatusVerifying, ActAccept, StatusResolved, []Actor{Person}},
	{StatusVerifying, ActRelease, StatusOpen, []Actor{Person, System}},
	{StatusVerifying, ActCancel, StatusCancelled, []Actor{Person}},

	{StatusNeedsReview, ActAccept, StatusResolved, []Actor{Person}},
	{StatusNeedsReview, ActResolve, StatusVerifying, []Actor{Person}},
	{StatusNeedsReview, ActReopen, StatusOpen, []Actor{Person}},
	{StatusNeedsReview, ActCancel, StatusCancelled, []Actor{Person}},

	{StatusResolved, ActReopen, StatusOpen, []Actor{Person}},
	{StatusCancelled, ActReopen, StatusOpen, []Actor{Person}},
}

// Actions lists every action, in the order of the status machine.
var Actions = []Action{ActPromote, ActReject, ActClaim, ActRelease, ActResolve, ActPass,
	ActFail, ActInconclusive, ActSkipVerify, ActAccept, ActCancel, ActReopen}

// Actors lists every actor.
var Actors = []Actor{Agent, Person, System}

// ErrTransition is the error [Transition] wraps when a move is not allowed.
var ErrTransition = errors.New("move not allowed")

// Transition is the status machine: the status a task in from moves to when
// actor takes action, or an error wrapping [ErrTransition] that says which
// moves are allowed instead.
func Transition(from Status, action Action, actor Actor) (Status, error) {
	var allowed []string
	for _, m := range moves {
		if m.from != from {
			continue
		}
		if m.action == action {
			if slices.Contains(m.actors, actor) {
				return m.to, nil
			}
			return "", fmt.Errorf("%w: only %s can %s a task that is %s", ErrTransition, actorList(m.actors), action, from)
		}
		if slices.Contains(m.actors, actor) {
			allowed = append(allowed, string(m.action))
		}
	}
	if !from.Valid() {
		return "", fmt.Errorf("%w: unknown status %q", ErrTransition, from)
	}
	if len(allowed) == 0 {
		return "", fmt.Errorf("%w: cannot %s a task that is %s; %s can make no move from %s", ErrTransition, action, from, actorName(actor), from)
	}
	return "", fmt.Errorf("%w: cannot %s a task that is %s; from %s %s can %s", ErrTransition, action, from, from, actorName(actor), strings.Join(allowed, ", "))
}

func actorName(a Actor) string {
	switch a {
	case Agent:
		return "an agent"
	case Person:
		return "a person"
	case System:
		return "snag"
	}
	return string(a)
}

func actorList(as []Actor) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = actorName(a)
	}
	return strings.Join(names, " or ")
}

// Blockers returns the depends_on entries of t that are not resolved: a task
// with any is blocked, shown [BLOCKED], and not handed out by claim-next.
// resolve looks a dependency up by id or alias; an entry it cannot find
// (a dangling reference) blocks too, since nothing shows it done.
func Blockers(t *Task, resolve func(ref string) (*Task, bool)) []string {
	var out []string
	for _, dep := range t.DependsOn {
		d, ok := resolve(dep)
		if !ok || d.Status != StatusResolved {
			out = append(out, dep)
		}
	}
	return out
}
