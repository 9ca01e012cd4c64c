package brief

import (
	"slices"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/snag"
)

// TestMergeActivity: the other worktrees' and clones' activity joins this
// one's by branch, each kind's keys newest first, at most five, each
// once; the latest branches come first, at most the limit, and the total
// counts them all.
func TestMergeActivity(t *testing.T) {
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	own := []snag.BranchActivity{{Branch: "main", Last: at, Claimed: []string{"SNAG-1"}}}
	own = mergeWorktrees(own, [][]snag.BranchActivity{
		{{Branch: "main", Last: at.Add(time.Minute), Claimed: []string{"SNAG-1", "SNAG-2"},
			Report: &snag.ActivityReport{Agent: "ADA", Message: "on it", At: at}}},
		{{Branch: "lexer", Last: at.Add(-time.Hour), Resolved: []string{"SNAG-3", "SNAG-4", "SNAG-5", "SNAG-6", "SNAG-7", "SNAG-8"}}},
	})
	team := map[string]*coord.BranchActivity{
		"parser": {Last: at.Add(time.Hour), Nodes: []string{"N-1"},
			Report: &coord.Message{From: "BEA", Host: "build-2", Body: "done", Created: at.Add(time.Hour)}},
		"main": {Last: at, Claimed: []string{"SNAG-9"}},
	}
	got, total := mergeActivity(own, team, 2)
	if total != 3 || len(got) != 2 {
		t.Fatalf("merged %d branches of %d: %+v, want 2 of 3", len(got), total, got)
	}
	if got[0].Branch != "parser" || got[0].Report == nil || got[0].Report.Agent != "BEA on build-2" {
		t.Fatalf("the latest branch: %+v, want parser with BEA's report", got[0])
	}
	if m := got[1]; m.Branch != "main" || !m.Last.Equal(at.Add(time.Minute)) ||
		!slices.Equal(m.Claimed, []string{"SNAG-1", "SNAG-2", "SNAG-9"}) || m.Report == nil || m.Report.Agent != "ADA" {
		t.Fatalf("main: %+v, want its worktrees' and clones' claims and ADA's report", m)
	}
	all, _ := mergeActivity(own, nil, 0)
	if l := all[len(all)-1]; l.Branch != "lexer" || len(l.Resolved) != 5 {
		t.Fatalf("lexer: %+v, want five of its resolves", l)
	}
}
