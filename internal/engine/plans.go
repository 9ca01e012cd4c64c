package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// PlanView is a plan with how its tasks (those whose plan: names it)
// stand, or the problem that keeps its file from being read.
type PlanView struct {
	Slug    string
	Plan    *queue.PlanFile // nil when the file does not parse
	Problem string
	// Tasks counts the plan's tasks by status.
	Tasks map[queue.Status]int
}

func (e *Engine) plansDir() string { return filepath.Join(e.root, ".snag", queue.PlansFolder) }

// Plans lists the plan files, newest first, each with its tasks' counts.
// A file that does not parse is listed with its problem.
func (e *Engine) Plans(ctx context.Context) ([]PlanView, error) {
	ents, err := os.ReadDir(e.plansDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	var out []PlanView
	for _, ent := range ents {
		slug, ok := strings.CutSuffix(ent.Name(), ".md")
		if !ok || ent.IsDir() || strings.HasPrefix(slug, ".") {
			continue
		}
		out = append(out, e.planView(ctx, slug))
	}
	slices.SortStableFunc(out, func(a, b PlanView) int {
		switch {
		case a.Plan == nil || b.Plan == nil:
			return strings.Compare(a.Slug, b.Slug)
		case !a.Plan.Created.Equal(b.Plan.Created):
			return b.Plan.Created.Compare(a.Plan.Created)
		}
		return strings.Compare(a.Slug, b.Slug)
	})
	return out, nil
}

// planView reads one plan and counts its tasks.
func (e *Engine) planView(ctx context.Context, slug string) PlanView {
	v := PlanView{Slug: slug}
	raw, err := os.ReadFile(filepath.Join(e.plansDir(), slug+".md"))
	if err == nil {
		v.Plan, err = codec.ParsePlan(slug, raw)
	}
	if err != nil {
		v.Problem = codec.WithPath(err, queue.PlansFolder+"/"+slug+".md").Error()
		return v
	}
	page, err := e.p.DB.List(ctx, index.Filter{Plan: slug, All: true, Limit: 1000})
	if err == nil {
		v.Tasks = map[queue.Status]int{}
		for _, r := range page.Rows {
			v.Tasks[r.Status]++
		}
	}
	return v
}
