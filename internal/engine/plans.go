package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/atomicfile"
	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
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

// PlanEdit is a change to a plan: nil fields stay as they are.
type PlanEdit struct {
	Title  *string
	Body   *string
	Status queue.PlanStatus // "" leaves it
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

// Plan reads one plan by its slug.
func (e *Engine) Plan(ctx context.Context, slug string) (PlanView, error) {
	if !queue.ValidSlug(slug) {
		return PlanView{}, refuse(ErrNotFound, "not_found", "no plan %q: plans are named by their slug (snag plans lists them)", slug)
	}
	if _, err := os.Stat(filepath.Join(e.plansDir(), slug+".md")); errors.Is(err, fs.ErrNotExist) {
		return PlanView{}, refuse(ErrNotFound, "not_found", "no plan %q: snag plans (or snag_plan {\"action\": \"list\"}) lists them", slug)
	}
	return e.planView(ctx, slug), nil
}

// CreatePlan writes a new plan, a draft: an agent's is unvetted, with the
// agent as its author, until a person activates it.
func (e *Engine) CreatePlan(ctx context.Context, actor queue.Actor, who, title, body string) (*queue.PlanFile, error) {
	title = strings.TrimSpace(title)
	entry := snag.AuditEntry{Actor: actor, Agent: who, Action: "plan_create"}
	switch {
	case title == "":
		return nil, refuse(ErrInvalid, "bad_title", "plan: give it a title: what the plan is for")
	case len(title) > 200:
		return nil, refuse(ErrInvalid, "bad_title", "plan: the title is over 200 bytes: keep it short and put the rest in the body")
	case len(body) > 64<<10:
		return nil, refuse(ErrInvalid, "long_body", "plan: the body is over 64 KiB: keep a plan to its goals and waves")
	case queue.Slug(title) == "":
		return nil, refuse(ErrInvalid, "bad_title", "plan: the title needs a letter or digit (a-z, 0-9) to name its file")
	}
	now := time.Now().UTC().Truncate(time.Second)
	p := &queue.PlanFile{Title: title, Status: queue.PlanDraft, Trust: queue.TrustVetted, Created: now, Body: []byte(body)}
	if actor != queue.Person {
		p.Trust, p.Author = queue.TrustUnvetted, who
	}
	data := codec.FormatPlan(p)
	if _, err := codec.ParsePlan("x", data); err != nil {
		return nil, refuse(ErrInvalid, "bad_title", "plan: %v", err)
	}
	if err := os.MkdirAll(e.plansDir(), 0o755); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	base := queue.Slug(title)
	for i := 1; ; i++ {
		slug := base
		if i > 1 {
			slug += "-" + strconv.Itoa(i)
		}
		err := atomicfile.Create(filepath.Join(e.plansDir(), slug+".md"), data, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		p.Slug = slug
		break
	}
	entry.Outcome, entry.Detail = "ok", fmt.Sprintf("%s %q (%s, %s)", p.Slug, title, p.Status, p.Trust)
	e.Audit(ctx, entry)
	e.hub.Publish(snag.PlanEvent{Plan: p.Slug, Created: true})
	return p, nil
}

// UpdatePlan changes a plan's title, body or status, line by line (its
// other bytes stay). An agent changes only unvetted plans (drafts it or
// another agent wrote), and never to active or done: a person decides
// that, as promotion vets an inbox item. A person's activation vets the
// plan.
func (e *Engine) UpdatePlan(ctx context.Context, actor queue.Actor, who, slug string, ed PlanEdit) (*queue.PlanFile, error) {
	entry := snag.AuditEntry{Actor: actor, Agent: who, Action: "plan_update"}
	refused := func(err *Error) (*queue.PlanFile, error) {
		entry.Outcome, entry.Detail = "refused", err.Message
		e.Audit(ctx, entry)
		return nil, err
	}
	v, err := e.Plan(ctx, slug)
	if err != nil {
		return nil, err
	}
	if v.Plan == nil {
		return refused(refuse(ErrNotClean, "not_clean", "plan %s does not parse: %s: fix the file by hand", slug, v.Problem))
	}
	p := v.Plan
	if ed.Status != "" && !slices.Contains(queue.PlanStatuses, ed.Status) {
		return refused(refuse(ErrInvalid, "bad_status", "plan: unknown status %q (want draft, active, done or archived)", ed.Status))
	}
	if actor != queue.Person {
		switch {
		case p.Trust == queue.TrustVetted:
			return refused(refuse(ErrInvalid, "person_only", "plan %s is vetted: only a person changes it. Propose changes in a new plan (create) or tell the person", slug))
		case ed.Status == queue.PlanActive || ed.Status == queue.PlanDone:
			return refused(refuse(ErrInvalid, "person_only", "only a person makes a plan %s (snag plans %s %s): tell the person it is ready", ed.Status, verbOf(ed.Status), slug))
		}
	}
	var fields []codec.Field
	var detail []string
	if ed.Title != nil {
		t := strings.TrimSpace(*ed.Title)
		if t == "" || len(t) > 200 {
			return refused(refuse(ErrInvalid, "bad_title", "plan: a title of 1 to 200 bytes"))
		}
		fields = append(fields, codec.Set("title", t))
		detail = append(detail, "title")
	}
	if ed.Status != "" && ed.Status != p.Status {
		fields = append(fields, codec.Set("status", string(ed.Status)))
		detail = append(detail, string(p.Status)+" -> "+string(ed.Status))
		if actor == queue.Person && ed.Status == queue.PlanActive && p.Trust != queue.TrustVetted {
			fields = append(fields, codec.Set("trust", string(queue.TrustVetted)))
			detail = append(detail, "vetted")
		}
	}
	if len(fields) == 0 && ed.Body == nil {
		return p, nil
	}
	fields = append(fields, codec.Set("updated", time.Now().UTC().Truncate(time.Second)))
	out, err := codec.Edit(p.Raw, fields...)
	if err == nil && ed.Body != nil {
		if len(*ed.Body) > 64<<10 {
			return refused(refuse(ErrInvalid, "long_body", "plan: the body is over 64 KiB"))
		}
		out, err = codec.WithBody(out, []byte(*ed.Body))
		detail = append(detail, "body")
	}
	if err != nil {
		return refused(refuse(ErrNotClean, "not_clean", "plan %s: %v: fix the file by hand", slug, err))
	}
	path := filepath.Join(e.plansDir(), slug+".md")
	// A person's save since the read is not overwritten: the file must
	// still hold the bytes the change was made from.
	if err := atomicfile.ReplaceIf(path, p.Raw, out, 0o644); errors.Is(err, atomicfile.ErrChanged) {
		return refused(refuse(ErrInvalid, "changing", "plan %s changed while it was being updated: read it again and retry", slug))
	} else if err != nil {
		return nil, fmt.Errorf("plan %s: %w", slug, err)
	}
	np, err := codec.ParsePlan(slug, out)
	if err != nil {
		return nil, err
	}
	entry.Outcome, entry.Detail = "ok", slug+": "+strings.Join(detail, ", ")
	e.Audit(ctx, entry)
	e.hub.Publish(snag.PlanEvent{Plan: slug, Status: np.Status})
	return np, nil
}

// verbOf is the snag plans subcommand that sets a status.
func verbOf(s queue.PlanStatus) string {
	switch s {
	case queue.PlanActive:
		return "activate"
	case queue.PlanArchived:
		return "archive"
	}
	return string(s)
}

// CreatePlanView is CreatePlan, answering the plan as Plan reads it.
func (e *Engine) CreatePlanView(ctx context.Context, actor queue.Actor, who, title, body string) (PlanView, error) {
	p, err := e.CreatePlan(ctx, actor, who, title, body)
	if err != nil {
		return PlanView{}, err
	}
	return e.planView(ctx, p.Slug), nil
}

// UpdatePlanView is UpdatePlan, answering the plan as Plan reads it.
func (e *Engine) UpdatePlanView(ctx context.Context, actor queue.Actor, who, slug string, ed PlanEdit) (PlanView, error) {
	p, err := e.UpdatePlan(ctx, actor, who, slug, ed)
	if err != nil {
		return PlanView{}, err
	}
	return e.planView(ctx, p.Slug), nil
}
