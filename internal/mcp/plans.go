package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

type planIn struct {
	Action string `json:"action"`
	ID     string `json:"id,omitempty" jsonschema:"slug"`
	Title  string `json:"title,omitempty"`
	Body   string `json:"body,omitempty"`
	Status string `json:"status,omitempty"`
	Agent  string `json:"agent,omitempty"`
}

type planRow struct {
	Slug   string         `json:"slug"`
	Title  string         `json:"title"`
	Status string         `json:"status"`
	Trust  string         `json:"trust"`
	Author string         `json:"author,omitempty"`
	Tasks  map[string]int `json:"tasks,omitempty"`
}

type planOut struct {
	Source   string    `json:"source"`
	Advisory string    `json:"advisory,omitempty"`
	Plans    []planRow `json:"plans,omitempty"`
	Plan     *planRow  `json:"plan,omitempty"`
	Body     string    `json:"body,omitempty"`
	File     string    `json:"file,omitempty"`
}

type noteIn struct {
	Title    string     `json:"title,omitempty" jsonschema:"omit to list decisions"`
	Body     string     `json:"body,omitempty"`
	Type     string     `json:"type,omitempty"`
	Task     string     `json:"task,omitempty"`
	Files    []string   `json:"files,omitempty"`
	Links    []noteLink `json:"links,omitempty"`
	TookFrom string     `json:"took_from,omitempty" jsonschema:"a note's key"`
	Why      string     `json:"why,omitempty"`
	Branch   string     `json:"branch,omitempty"`
	Agent    string     `json:"agent,omitempty"`
}

type noteLink struct {
	To   string `json:"to"`
	Kind string `json:"kind"`
	Why  string `json:"why,omitempty"`
}

type notesOut struct {
	Source   string    `json:"source"`
	Advisory string    `json:"advisory,omitempty"`
	Notes    []noteOut `json:"notes,omitempty"`
}

// planBodyCut is how much of a plan's body snag_plan's text shows.
const planBodyCut = 3000

func planRowOf(p snag.Plan) planRow {
	return planRow{Slug: p.Slug, Title: p.Title, Status: string(p.Status), Trust: string(p.Trust), Author: p.Author, Tasks: p.Tasks}
}

// planLine is one plan as snag_plan and snag_context list it.
func planLine(p snag.Plan) string {
	if p.Problem != "" {
		return p.Slug + ": does not parse: " + oneLine(p.Problem, 160)
	}
	title := oneLine(p.Title, 80)
	if p.Trust != "vetted" {
		title = "[unvetted] " + quoted(p.Title, 80)
	}
	line := fmt.Sprintf("%s %s %s", p.Slug, p.Status, title)
	var counts []string
	for _, st := range statusOrder {
		if n := p.Tasks[st]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(counts) > 0 {
		line += ": " + strings.Join(counts, ", ")
	}
	return line
}

func (s *server) plan(ctx context.Context, req *sdk.CallToolRequest, in planIn) (*sdk.CallToolResult, planOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_plan"), in.Agent)
	act, ok := planActions[in.Action]
	if !ok {
		return nil, planOut{}, fmt.Errorf("action %q: use list, get, create or update", in.Action)
	}
	if (in.Action == "get" || in.Action == "update") && in.ID == "" {
		return nil, planOut{}, fmt.Errorf("%s needs id, the plan's slug: snag_plan {\"action\": \"list\"} lists them", in.Action)
	}
	var out planOut
	var msg string
	notFound := false
	advice, err := s.teamCall(ctx, func(t Team) (err error) {
		out, msg, err = act(ctx, t, in)
		if errors.Is(err, errNoPlan) {
			notFound = true
			return nil
		}
		return err
	})
	if notFound {
		return nil, planOut{}, fmt.Errorf("no plan %q: snag_plan {\"action\": \"list\"} lists them", in.ID)
	}
	if err != nil {
		return nil, planOut{}, err
	}
	if advice != "" {
		return &sdk.CallToolResult{Content: text(advice)}, planOut{Source: SourceFiles, Advisory: advice}, nil
	}
	out.Source = SourceDaemon
	return &sdk.CallToolResult{Content: text(msg)}, out, nil
}

// planActions are snag_plan's actions: each reads or writes plans
// through t and answers the structured content (but its source) and the
// text a model reads.
var planActions = map[string]func(ctx context.Context, t Team, in planIn) (planOut, string, error){
	"list":   planList,
	"get":    planGet,
	"create": planCreate,
	"update": planUpdate,
}

// errNoPlan is a get or an update of a plan there is not.
var errNoPlan = errors.New("no such plan")

// planList lists the plans, those of in.Status when it is set.
func planList(ctx context.Context, t Team, in planIn) (planOut, string, error) {
	got, err := t.Plans(ctx)
	if err != nil {
		return planOut{}, "", err
	}
	var out planOut
	var b strings.Builder
	if len(got.Plans) == 0 {
		b.WriteString("no plans yet: snag_plan {\"action\": \"create\", \"title\": ...} drafts one")
	}
	for _, p := range got.Plans {
		if in.Status != "" && string(p.Status) != in.Status {
			continue // list filters by status
		}
		out.Plans = append(out.Plans, planRowOf(p))
		b.WriteString(planLine(p) + "\n")
	}
	if len(got.Plans) > 0 && len(out.Plans) == 0 {
		fmt.Fprintf(&b, "no plan is %s", in.Status)
	}
	return out, strings.TrimRight(b.String(), "\n"), nil
}

// planGet shows the plan in.ID, with its body.
func planGet(ctx context.Context, t Team, in planIn) (planOut, string, error) {
	got, err := t.Plan(ctx, in.ID)
	if errors.Is(err, ErrNotFound) {
		return planOut{}, "", errNoPlan
	}
	if err != nil {
		return planOut{}, "", err
	}
	out, msg := planDetail(got, "")
	return out, msg, nil
}

// planCreate drafts a plan of in.Title and in.Body.
func planCreate(ctx context.Context, t Team, in planIn) (planOut, string, error) {
	got, err := t.CreatePlan(ctx, ops.PlanRequest{Title: &in.Title, Body: &in.Body})
	if err != nil {
		return planOut{}, "", err
	}
	out, msg := planDetail(got, "created ")
	return out, msg, nil
}

// planUpdate sets the status, title or body of the plan in.ID, those
// given.
func planUpdate(ctx context.Context, t Team, in planIn) (planOut, string, error) {
	r := ops.PlanRequest{Status: in.Status}
	if in.Title != "" {
		r.Title = &in.Title
	}
	if in.Body != "" {
		r.Body = &in.Body
	}
	got, err := t.UpdatePlan(ctx, in.ID, r)
	if errors.Is(err, ErrNotFound) {
		return planOut{}, "", errNoPlan
	}
	if err != nil {
		return planOut{}, "", err
	}
	out, msg := planDetail(got, "updated ")
	return out, msg, nil
}

// planDetail is one plan as snag_plan answers it: its line after verb,
// who drafted it when a person has not vetted it, and, for a get (verb
// ""), its body fenced unless vetted.
func planDetail(d ops.PlanDetail, verb string) (planOut, string) {
	r := planRowOf(d.Plan)
	out := planOut{Plan: &r, File: d.File, Body: d.Body}
	var b strings.Builder
	b.WriteString(verb + planLine(d.Plan) + "\n")
	if d.Trust != "vetted" && d.Author != "" {
		b.WriteString("by " + d.Author + "; a person activates it (snag plans activate " + d.Slug + ")\n")
	}
	if verb == "" {
		body := strings.TrimSpace(cutPlanBody(d))
		if d.Trust != "vetted" {
			body = fence(body)
		}
		b.WriteString("---\n" + body + "\n---")
	}
	return out, b.String()
}

// cutPlanBody is a plan's body cut to planBodyCut bytes, saying where
// the rest is.
func cutPlanBody(d ops.PlanDetail) string {
	if len(d.Body) <= planBodyCut {
		return d.Body
	}
	cut := planBodyCut
	for cut > 0 && d.Body[cut]&0xC0 == 0x80 {
		cut--
	}
	return d.Body[:cut] + fmt.Sprintf("\n[cut at %d of %d bytes: Read %s for the rest]", cut, len(d.Body), d.File)
}

func (s *server) note(ctx context.Context, req *sdk.CallToolRequest, in noteIn) (*sdk.CallToolResult, notesOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_note"), in.Agent)
	out := notesOut{Source: SourceDaemon}
	var msg string
	advice, err := s.teamCall(ctx, func(t Team) error {
		if strings.TrimSpace(in.Title) == "" {
			got, err := t.Notes(ctx, ops.NoteQuery{Type: "decision", Limit: 10})
			if err != nil {
				return err
			}
			var b strings.Builder
			if len(got.Notes) == 0 {
				b.WriteString("no decisions yet: snag_note {\"title\": ...} records one")
			}
			for _, n := range got.Notes {
				o := noteOutOf(n)
				out.Notes = append(out.Notes, o)
				b.WriteString(noteLine(o) + "\n")
			}
			if len(got.Notes) > 0 {
				b.WriteString("Read a note's file for its reasoning (file in the structured result).")
			}
			msg = b.String()
			return nil
		}
		branch, commit, tree, err := s.where(ctx, in.Branch)
		if err != nil {
			return err
		}
		r := ops.NoteRequest{Title: in.Title, Body: in.Body, Type: in.Type, Task: in.Task, Files: in.Files,
			TookFrom: in.TookFrom, Why: in.Why, Branch: branch, Commit: commit, Worktree: tree}
		for _, l := range in.Links {
			r.Links = append(r.Links, snag.Link{To: l.To, Kind: l.Kind, Why: l.Why})
		}
		got, err := t.AddNote(ctx, r)
		if err != nil {
			return err
		}
		o := noteOutOf(got.Note)
		out.Notes = []noteOut{o}
		msg = fmt.Sprintf("wrote %s (%s, %s, on %s) in %s: commit it with your work; snag_nodes finds it", got.Key, got.Type, got.Trust, got.Branch, got.File)
		return nil
	})
	if err != nil {
		return nil, notesOut{}, err
	}
	if advice != "" {
		return &sdk.CallToolResult{Content: text(advice)}, notesOut{Source: SourceFiles, Advisory: advice}, nil
	}
	return &sdk.CallToolResult{Content: text(msg)}, out, nil
}
