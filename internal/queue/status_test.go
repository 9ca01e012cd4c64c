package queue_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/queue"
)

// allowedMove is one row of the status machine: actor may take action on a
// task in from, which then is in to.
type allowedMove struct {
	from   queue.Status
	action queue.Action
	actor  queue.Actor
	to     queue.Status
}

// statusMachine is DESIGN section 4, written out move by move and actor by
// actor. Only people promote, reject, cancel, reopen and accept; agents
// claim, release and resolve; snag itself (verify, the lease sweep) passes,
// fails, declares a check inconclusive, skips verify and releases.
var statusMachine = []allowedMove{
	{queue.StatusInbox, queue.ActPromote, queue.Person, queue.StatusOpen},
	{queue.StatusInbox, queue.ActReject, queue.Person, queue.StatusCancelled},
	{queue.StatusInbox, queue.ActCancel, queue.Person, queue.StatusCancelled},

	{queue.StatusOpen, queue.ActClaim, queue.Agent, queue.StatusClaimed},
	{queue.StatusOpen, queue.ActClaim, queue.Person, queue.StatusClaimed},
	{queue.StatusOpen, queue.ActAccept, queue.Person, queue.StatusResolved},
	{queue.StatusOpen, queue.ActCancel, queue.Person, queue.StatusCancelled},

	{queue.StatusClaimed, queue.ActRelease, queue.Agent, queue.StatusOpen},
	{queue.StatusClaimed, queue.ActRelease, queue.Person, queue.StatusOpen},
	{queue.StatusClaimed, queue.ActRelease, queue.System, queue.StatusOpen},
	{queue.StatusClaimed, queue.ActResolve, queue.Agent, queue.StatusVerifying},
	{queue.StatusClaimed, queue.ActResolve, queue.Person, queue.StatusVerifying},
	{queue.StatusClaimed, queue.ActAccept, queue.Person, queue.StatusResolved},
	{queue.StatusClaimed, queue.ActCancel, queue.Person, queue.StatusCancelled},

	{queue.StatusVerifying, queue.ActPass, queue.System, queue.StatusResolved},
	{queue.StatusVerifying, queue.ActFail, queue.System, queue.StatusClaimed},
	{queue.StatusVerifying, queue.ActInconclusive, queue.System, queue.StatusNeedsReview},
	{queue.StatusVerifying, queue.ActSkipVerify, queue.System, queue.StatusResolved},
	{queue.StatusVerifying, queue.ActAccept, queue.Person, queue.StatusResolved},
	{queue.StatusVerifying, queue.ActRelease, queue.Person, queue.StatusOpen},
	{queue.StatusVerifying, queue.ActRelease, queue.System, queue.StatusOpen},
	{queue.StatusVerifying, queue.ActCancel, queue.Person, queue.StatusCancelled},

	{queue.StatusNeedsReview, queue.ActAccept, queue.Person, queue.StatusResolved},
	{queue.StatusNeedsReview, queue.ActResolve, queue.Person, queue.StatusVerifying},
	{queue.StatusNeedsReview, queue.ActReopen, queue.Person, queue.StatusOpen},
	{queue.StatusNeedsReview, queue.ActCancel, queue.Person, queue.StatusCancelled},

	{queue.StatusResolved, queue.ActReopen, queue.Person, queue.StatusOpen},
	{queue.StatusCancelled, queue.ActReopen, queue.Person, queue.StatusOpen},
}

var actorNames = map[queue.Actor]string{queue.Agent: "an agent", queue.Person: "a person", queue.System: "snag"}

func TestTransition_EveryTriple(t *testing.T) {
	if len(queue.Statuses) != 7 || len(queue.Actions) != 12 || len(queue.Actors) != 3 {
		t.Fatalf("the machine has %d statuses, %d actions, %d actors: update statusMachine in this test first",
			len(queue.Statuses), len(queue.Actions), len(queue.Actors))
	}
	for _, from := range queue.Statuses {
		for _, action := range queue.Actions {
			for _, actor := range queue.Actors {
				t.Run(fmt.Sprintf("%s/%s/%s", from, action, actor), func(t *testing.T) {
					want, ok := lookupMove(from, action, actor)
					got, err := queue.Transition(from, action, actor)
					if ok {
						if err != nil || got != want {
							t.Fatalf("Transition = %q, %v; want %q", got, err, want)
						}
						return
					}
					if err == nil {
						t.Fatalf("Transition = %q, want it refused", got)
					}
					if !errors.Is(err, queue.ErrTransition) {
						t.Errorf("error %v does not wrap ErrTransition", err)
					}
					if got != "" {
						t.Errorf("refused move returned status %q", got)
					}
					for _, s := range wantInRefusal(from, action, actor) {
						if !strings.Contains(err.Error(), s) {
							t.Errorf("error %q does not say %q", err, s)
						}
					}
				})
			}
		}
	}
}

func lookupMove(from queue.Status, action queue.Action, actor queue.Actor) (queue.Status, bool) {
	for _, m := range statusMachine {
		if m.from == from && m.action == action && m.actor == actor {
			return m.to, true
		}
	}
	return "", false
}

// wantInRefusal is what a refusal must say: who may make the move when
// someone may, or else what the actor may do instead.
func wantInRefusal(from queue.Status, action queue.Action, actor queue.Actor) []string {
	var who []string
	for _, a := range queue.Actors {
		if _, ok := lookupMove(from, action, a); ok {
			who = append(who, actorNames[a])
		}
	}
	if len(who) > 0 {
		return []string{fmt.Sprintf("only %s can %s a task that is %s", strings.Join(who, " or "), action, from)}
	}
	var can []string
	for _, m := range statusMachine {
		if m.from == from && m.actor == actor {
			can = append(can, string(m.action))
		}
	}
	prefix := fmt.Sprintf("cannot %s a task that is %s; ", action, from)
	if len(can) == 0 {
		return []string{prefix + actorNames[actor] + " can make no move from " + string(from)}
	}
	return []string{prefix + "from " + string(from) + " " + actorNames[actor] + " can " + strings.Join(can, ", ")}
}

func TestTransition_Refusals(t *testing.T) {
	tests := []struct {
		from   queue.Status
		action queue.Action
		actor  queue.Actor
		want   string
	}{
		{queue.StatusInbox, queue.ActPromote, queue.Agent, "move not allowed: only a person can promote a task that is inbox"},
		{queue.StatusOpen, queue.ActResolve, queue.Agent, "move not allowed: cannot resolve a task that is open; from open an agent can claim"},
		{queue.StatusClaimed, queue.ActClaim, queue.Agent, "move not allowed: cannot claim a task that is claimed; from claimed an agent can release, resolve"},
		{queue.StatusResolved, queue.ActClaim, queue.Agent, "move not allowed: cannot claim a task that is resolved; an agent can make no move from resolved"},
		{queue.StatusVerifying, queue.ActRelease, queue.Agent, "move not allowed: only a person or snag can release a task that is verifying"},
		{queue.StatusVerifying, queue.ActPass, queue.Person, "move not allowed: only snag can pass a task that is verifying"},
		{"blocked", queue.ActClaim, queue.Agent, `move not allowed: unknown status "blocked"`},
		{queue.StatusOpen, "steal", queue.Agent, "move not allowed: cannot steal a task that is open; from open an agent can claim"},
		{queue.StatusOpen, queue.ActClaim, "robot", "move not allowed: only an agent or a person can claim a task that is open"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%s", tt.from, tt.action, tt.actor), func(t *testing.T) {
			_, err := queue.Transition(tt.from, tt.action, tt.actor)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Transition error = %v\nwant %s", err, tt.want)
			}
			if !errors.Is(err, queue.ErrTransition) {
				t.Errorf("error does not wrap ErrTransition")
			}
		})
	}
}

func TestStatus_Predicates(t *testing.T) {
	for _, s := range queue.Statuses {
		if !s.Valid() {
			t.Errorf("%s: Valid() = false", s)
		}
		if want := s == queue.StatusResolved || s == queue.StatusCancelled; s.Terminal() != want {
			t.Errorf("%s: Terminal() = %v, want %v", s, s.Terminal(), want)
		}
	}
	for _, s := range []queue.Status{"", "blocked", "Open", "conflict", "invalid"} {
		if s.Valid() {
			t.Errorf("%q: Valid() = true", s)
		}
	}
}

func TestSeverity_Rank(t *testing.T) {
	got := map[queue.Severity]int{}
	for _, s := range append(queue.Severities, "", "urgent") {
		got[s] = s.Rank()
	}
	want := map[queue.Severity]int{"critical": 0, "high": 1, "medium": 2, "low": 3, "": 4, "urgent": 4}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Rank (-want +got):\n%s", diff)
	}
}

func TestBlockers(t *testing.T) {
	tasks := map[string]*queue.Task{
		"SNAG-1": {Key: "SNAG-1", Status: queue.StatusResolved},
		"SNAG-2": {Key: "SNAG-2", Status: queue.StatusOpen},
		"SNAG-3": {Key: "SNAG-3", Status: queue.StatusCancelled},
		"SNAG-4": {Key: "SNAG-4", Status: queue.StatusVerifying},
		testID:   {ID: testID, Status: queue.StatusResolved},
		testID2:  {ID: testID2, Status: queue.StatusClaimed},
	}
	resolve := func(ref string) (*queue.Task, bool) { tk, ok := tasks[ref]; return tk, ok }
	tests := []struct {
		name string
		deps []string
		want []string
	}{
		{"no deps", nil, nil},
		{"resolved does not block", []string{"SNAG-1"}, nil},
		{"resolved by id does not block", []string{testID}, nil},
		{"open blocks", []string{"SNAG-2"}, []string{"SNAG-2"}},
		{"cancelled blocks (it was never done)", []string{"SNAG-3"}, []string{"SNAG-3"}},
		{"verifying blocks", []string{"SNAG-4"}, []string{"SNAG-4"}},
		{"claimed by id blocks", []string{testID2}, []string{testID2}},
		{"dangling blocks", []string{"SNAG-99"}, []string{"SNAG-99"}},
		{"mixed keeps order", []string{"SNAG-99", "SNAG-1", "SNAG-2", testID}, []string{"SNAG-99", "SNAG-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := queue.Blockers(&queue.Task{DependsOn: tt.deps}, resolve)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Blockers (-want +got):\n%s", diff)
			}
		})
	}
}
