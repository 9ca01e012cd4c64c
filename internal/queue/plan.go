package queue

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
)

// PlanVersion is the version of the plan.json layout.
const PlanVersion = 1

// Compare orders tasks as the queue hands them out: lower wave first, then
// higher severity, then older, then by id. plan.json, lists and claim-next
// all use this order.
func Compare(a, b *Task) int {
	return cmp.Or(
		cmp.Compare(a.Wave, b.Wave),
		cmp.Compare(a.Severity.Rank(), b.Severity.Rank()),
		a.Created.Compare(b.Created),
		strings.Compare(a.ID, b.ID),
	)
}

// Located is a task with the name of the file it was read from.
type Located struct {
	Task *Task
	File string // relative to .snag/, like tasks/SNAG-12 - Title.md
}

// Problem is a file that could not be read as a task.
type Problem struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// Plan is plan.json: a snapshot of the queue for readers without the daemon.
// It is generated, ignored by git, and regenerated after every change.
type Plan struct {
	Version  int        `json:"version"`
	Tasks    []PlanTask `json:"tasks"`
	Problems []Problem  `json:"problems,omitempty"`
}

// PlanTask is one task's row in plan.json.
type PlanTask struct {
	ID        string   `json:"id"`
	Key       string   `json:"key"`
	Title     string   `json:"title"`
	Status    Status   `json:"status"`
	Trust     Trust    `json:"trust"`
	Severity  Severity `json:"severity"`
	Kind      Kind     `json:"kind"`
	Wave      int      `json:"wave"`
	Plan      string   `json:"plan,omitempty"`
	Assignee  string   `json:"assignee,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"`
	BlockedBy []string `json:"blocked_by,omitempty"`
	File      string   `json:"file"`
}

// Lookup finds tasks by id or alias among a set of tasks.
type Lookup map[string]*Task

// NewLookup indexes tasks by canonical id and by alias.
func NewLookup(tasks []*Task) Lookup {
	l := make(Lookup, 2*len(tasks))
	for _, t := range tasks {
		l[t.ID] = t
		if t.Key != "" {
			l[t.Key] = t
		}
	}
	return l
}

// Find resolves a reference typed in any case.
func (l Lookup) Find(ref string) (*Task, bool) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, false
	}
	t, ok := l[r.String()]
	return t, ok
}

// BuildPlan renders plan.json for the given tasks and problems. The output
// depends only on its input (no timestamps), so the same files always give
// the same bytes.
func BuildPlan(tasks []Located, problems []Problem) []byte {
	all := make([]*Task, len(tasks))
	for i, l := range tasks {
		all[i] = l.Task
	}
	lookup := NewLookup(all)
	sorted := slices.Clone(tasks)
	slices.SortStableFunc(sorted, func(a, b Located) int {
		return cmp.Or(Compare(a.Task, b.Task), strings.Compare(a.File, b.File))
	})
	p := Plan{Version: PlanVersion, Tasks: make([]PlanTask, 0, len(sorted))}
	for _, l := range sorted {
		t := l.Task
		var blocked []string
		if !t.Status.Terminal() {
			blocked = Blockers(t, lookup.Find)
		}
		p.Tasks = append(p.Tasks, PlanTask{
			ID: t.ID, Key: t.Key, Title: t.Title, Status: t.Status, Trust: t.Trust,
			Severity: t.Severity, Kind: t.Kind, Wave: t.Wave, Plan: t.Plan, Assignee: t.Assignee,
			DependsOn: t.DependsOn, BlockedBy: blocked, File: l.File,
		})
	}
	p.Problems = slices.Clone(problems)
	slices.SortFunc(p.Problems, func(a, b Problem) int { return strings.Compare(a.File, b.File) })
	out, _ := json.MarshalIndent(p, "", "  ")
	return append(out, '\n')
}
