package graph

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
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// PlanEdit is a change to a plan: nil fields stay as they are.
type PlanEdit struct {
	Title  *string
	Body   *string
	Status queue.PlanStatus // "" leaves it
}

// Plan reads one plan by its slug.
func (s *Service) Plan(ctx context.Context, slug string) (engine.PlanView, error) {
	if !queue.ValidSlug(slug) {
		return engine.PlanView{}, refuse(engine.ErrNotFound, "not_found", "no plan %q: plans are named by their slug (snag plans lists them)", slug)
	}
	if _, err := os.Stat(filepath.Join(s.plansDir(), slug+".md")); errors.Is(err, fs.ErrNotExist) {
		return engine.PlanView{}, refuse(engine.ErrNotFound, "not_found", "no plan %q: snag plans (or snag_plan {\"action\": \"list\"}) lists them", slug)
	}
	return s.e.PlanView(ctx, slug), nil
}

// CreatePlan writes a new plan, a draft: an agent's is unvetted, with the
// agent as its author, until a person activates it.
func (s *Service) CreatePlan(ctx context.Context, actor queue.Actor, who, title, body string) (*queue.PlanFile, error) {
	title = strings.TrimSpace(title)
	entry := snag.AuditEntry{Actor: actor, Agent: who, Action: "plan_create"}
	switch {
	case title == "":
		return nil, refuse(engine.ErrInvalid, "bad_title", "plan: give it a title: what the plan is for")
	case len(title) > 200:
		return nil, refuse(engine.ErrInvalid, "bad_title", "plan: the title is over 200 bytes: keep it short and put the rest in the body")
	case len(body) > 64<<10:
		return nil, refuse(engine.ErrInvalid, "long_body", "plan: the body is over 64 KiB: keep a plan to its goals and waves")
	case queue.Slug(title) == "":
		return nil, refuse(engine.ErrInvalid, "bad_title", "plan: the title needs a letter or digit (a-z, 0-9) to name its file")
	}
	now := time.Now().UTC().Truncate(time.Second)
	p := &queue.PlanFile{Title: title, Status: queue.PlanDraft, Trust: queue.TrustVetted, Created: now, Body: []byte(body)}
	if actor != queue.Person {
		p.Trust, p.Author = queue.TrustUnvetted, who
	}
	data := codec.FormatPlan(p)
	if _, err := codec.ParsePlan("x", data); err != nil {
		return nil, refuse(engine.ErrInvalid, "bad_title", "plan: %v", err)
	}
	if err := os.MkdirAll(s.plansDir(), 0o755); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	base := queue.Slug(title)
	for i := 1; ; i++ {
		slug := base
		if i > 1 {
			slug += "-" + strconv.Itoa(i)
		}
		err := atomicfile.Create(filepath.Join(s.plansDir(), slug+".md"), data, 0o644)
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
	s.e.Audit(ctx, entry)
	s.publish(snag.PlanEvent{Plan: p.Slug, Created: true})
	return p, nil
}

// UpdatePlan changes a plan's title, body or status, line by line (its
// other bytes stay). An agent changes only unvetted plans (drafts it or
// another agent wrote), and never to active or done: a person decides
// that, as promotion vets an inbox item. A person's activation vets the
// plan.
func (s *Service) UpdatePlan(ctx context.Context, actor queue.Actor, who, slug string, ed PlanEdit) (*queue.PlanFile, error) {
	entry := snag.AuditEntry{Actor: actor, Agent: who, Action: "plan_update"}
	refused := func(err *engine.Error) (*queue.PlanFile, error) {
		entry.Outcome, entry.Detail = "refused", err.Message
		s.e.Audit(ctx, entry)
		return nil, err
	}
	v, err := s.Plan(ctx, slug)
	if err != nil {
		return nil, err
	}
	if v.Plan == nil {
		return refused(refuse(engine.ErrNotClean, "not_clean", "plan %s does not parse: %s: fix the file by hand", slug, v.Problem))
	}
	p := v.Plan
	if ed.Status != "" && !slices.Contains(queue.PlanStatuses, ed.Status) {
		return refused(refuse(engine.ErrInvalid, "bad_status", "plan: unknown status %q (want draft, active, done or archived)", ed.Status))
	}
	if actor != queue.Person {
		switch {
		case p.Trust == queue.TrustVetted:
			return refused(refuse(engine.ErrInvalid, "person_only", "plan %s is vetted: only a person changes it. Propose changes in a new plan (create) or tell the person", slug))
		case ed.Status == queue.PlanActive || ed.Status == queue.PlanDone:
			return refused(refuse(engine.ErrInvalid, "person_only", "only a person makes a plan %s (snag plans %s %s): tell the person it is ready", ed.Status, verbOf(ed.Status), slug))
		}
	}
	var fields []codec.Field
	var detail []string
	if ed.Title != nil {
		t := strings.TrimSpace(*ed.Title)
		if t == "" || len(t) > 200 {
			return refused(refuse(engine.ErrInvalid, "bad_title", "plan: a title of 1 to 200 bytes"))
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
			return refused(refuse(engine.ErrInvalid, "long_body", "plan: the body is over 64 KiB"))
		}
		out, err = codec.WithBody(out, []byte(*ed.Body))
		detail = append(detail, "body")
	}
	if err != nil {
		return refused(refuse(engine.ErrNotClean, "not_clean", "plan %s: %v: fix the file by hand", slug, err))
	}
	path := filepath.Join(s.plansDir(), slug+".md")
	// A person's save since the read is not overwritten: the file must
	// still hold the bytes the change was made from.
	if err := atomicfile.ReplaceIf(path, p.Raw, out, 0o644); errors.Is(err, atomicfile.ErrChanged) {
		return refused(refuse(engine.ErrInvalid, "changing", "plan %s changed while it was being updated: read it again and retry", slug))
	} else if err != nil {
		return nil, fmt.Errorf("plan %s: %w", slug, err)
	}
	np, err := codec.ParsePlan(slug, out)
	if err != nil {
		return nil, err
	}
	entry.Outcome, entry.Detail = "ok", slug+": "+strings.Join(detail, ", ")
	s.e.Audit(ctx, entry)
	s.publish(snag.PlanEvent{Plan: slug, Status: np.Status})
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
func (s *Service) CreatePlanView(ctx context.Context, actor queue.Actor, who, title, body string) (engine.PlanView, error) {
	p, err := s.CreatePlan(ctx, actor, who, title, body)
	if err != nil {
		return engine.PlanView{}, err
	}
	return s.e.PlanView(ctx, p.Slug), nil
}

// UpdatePlanView is UpdatePlan, answering the plan as Plan reads it.
func (s *Service) UpdatePlanView(ctx context.Context, actor queue.Actor, who, slug string, ed PlanEdit) (engine.PlanView, error) {
	p, err := s.UpdatePlan(ctx, actor, who, slug, ed)
	if err != nil {
		return engine.PlanView{}, err
	}
	return s.e.PlanView(ctx, p.Slug), nil
}

// Plans lists the plan files, newest first, each with its tasks' counts
// (the engine's Plans, which its team context reads too). A file that
// does not parse is listed with its problem.
func (s *Service) Plans(ctx context.Context) ([]engine.PlanView, error) { return s.e.Plans(ctx) }

// plansDir is the folder of the plan files.
func (s *Service) plansDir() string { return filepath.Join(s.root(), ".snag", queue.PlansFolder) }
