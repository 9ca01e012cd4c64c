package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// Toolsets are the toolsets a server can serve, in the order tools/list
// gives them.
var Toolsets = []string{"queue", "team", "graph"}

// Team is what the team toolset needs of snagd. The live backends meet
// it; with no daemon the team tools answer advisory text, not errors.
type Team interface {
	Context(ctx context.Context, name string) (ops.Context, error)
	ClaimFiles(ctx context.Context, r ops.FilesRequest) (ops.FilesClaimed, error)
	ReleaseFiles(ctx context.Context, paths []string) (ops.FilesReleased, error)
	CheckFiles(ctx context.Context, paths []string) (ops.FilesChecked, error)
	Report(ctx context.Context, r ops.ReportRequest) (snag.Message, error)
	Handoff(ctx context.Context, r ops.HandoffRequest) (ops.HandedOff, error)
	Plans(ctx context.Context) (ops.PlanList, error)
	Plan(ctx context.Context, slug string) (ops.PlanDetail, error)
	CreatePlan(ctx context.Context, r ops.PlanRequest) (ops.PlanDetail, error)
	UpdatePlan(ctx context.Context, slug string, r ops.PlanRequest) (ops.PlanDetail, error)
	Notes(ctx context.Context, q ops.NoteQuery) (ops.NoteList, error)
	AddNote(ctx context.Context, r ops.NoteRequest) (ops.NoteDetail, error)
}

// advisory is what a team tool answers when no snagd coordinates: the
// agent's turn goes on.
func (s *server) advisory(why error) string {
	return fmt.Sprintf("coordination is unavailable (%v): carry on with your work, claim nothing, and tell the person. "+
		"`snag daemon --root %s` starts it", why, s.opts.Root)
}

// team is the backend for a team tool, or nil with why there is none.
func (s *server) team(ctx context.Context) (Team, error) {
	if t, ok := s.writer(ctx).(Team); ok {
		return t, nil
	}
	if err := s.dialErr(); err != nil {
		return nil, err
	}
	return nil, ErrNoDaemon
}

// teamCall runs f on the team backend; when no daemon answers, it returns
// the advisory text instead (ok false). Other errors are the tool's.
func (s *server) teamCall(ctx context.Context, f func(t Team) error) (advice string, err error) {
	t, why := s.team(ctx)
	if t == nil {
		return s.advisory(why), nil
	}
	if err := f(t); err != nil {
		if unreachable(err) || errors.Is(err, ErrNoDaemon) {
			return s.advisory(err), nil
		}
		return "", s.explain(err)
	}
	return "", nil
}

type filesIn struct {
	Action    string   `json:"action"`
	Paths     []string `json:"paths,omitempty" jsonschema:"paths or globs"`
	Task      string   `json:"task,omitempty"`
	TTLSec    int      `json:"ttl_sec,omitempty"`
	Exclusive *bool    `json:"exclusive,omitempty"`
	Agent     string   `json:"agent,omitempty"`
}

type claimOutRow struct {
	Path      string `json:"path"`
	Holder    string `json:"holder"`
	Exclusive bool   `json:"exclusive"`
	LeftSec   int    `json:"left_sec"`
}

type filesOut struct {
	Source    string        `json:"source"`
	Advisory  string        `json:"advisory,omitempty"`
	Granted   bool          `json:"granted"`
	Claims    []claimOutRow `json:"claims,omitempty"`
	Conflicts []claimOutRow `json:"conflicts,omitempty"`
}

type reportIn struct {
	Message string `json:"message"`
	Task    string `json:"task,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Agent   string `json:"agent,omitempty"`
}

type handoffIn struct {
	To    string `json:"to"`
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
	Task  string `json:"task,omitempty" jsonschema:"moves it to them"`
	Agent string `json:"agent,omitempty"`
}

type sentOut struct {
	Source   string `json:"source"`
	Advisory string `json:"advisory,omitempty"`
	ID       int64  `json:"id,omitempty"`
	Moved    bool   `json:"moved,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"`
}

func (s *server) addTeamTools(srv *sdk.Server) {
	addTool(srv, &sdk.Tool{Name: "snag_context", OutputSchema: outSchema[contextOut](), Annotations: writes("Team context", true),
		Description: "Call first: you, your work, ready tasks, other agents, handoffs."}, s.context)
	addTool(srv, &sdk.Tool{Name: "snag_files", OutputSchema: outSchema[filesOut](), Annotations: writes("Claim files", false),
		InputSchema: schema[filesIn](func(p map[string]*jsonschema.Schema) {
			p["action"].Enum = []any{"claim", "release", "check"}
			p["paths"].Type, p["paths"].Types = "array", nil
			lo, hi := 1.0, 86400.0
			p["ttl_sec"].Default, p["ttl_sec"].Minimum, p["ttl_sec"].Maximum = json.RawMessage("900"), &lo, &hi
			p["exclusive"].Default, p["exclusive"].Type, p["exclusive"].Types = json.RawMessage("true"), "boolean", nil
		}),
		Description: "Claim files before editing, all or nothing. Release with no paths frees all."}, s.fileClaims)
	addTool(srv, &sdk.Tool{Name: "snag_plan", OutputSchema: outSchema[planOut](), Annotations: writes("Plans", false),
		InputSchema: schema[planIn](func(p map[string]*jsonschema.Schema) {
			p["action"].Enum = []any{"list", "get", "create", "update"}
			p["status"].Enum = []any{"draft", "active", "done", "archived"}
		}),
		Description: "Read plans, or draft one."}, s.plan)
	addTool(srv, &sdk.Tool{Name: "snag_note", OutputSchema: outSchema[notesOut](), Annotations: writes("Note a decision", false),
		InputSchema: schema[noteIn](func(p map[string]*jsonschema.Schema) {
			p["type"].Enum, p["type"].Default = noteTypes(), json.RawMessage(`"decision"`)
			p["files"].Type, p["files"].Types = "array", nil
			p["links"].Type, p["links"].Types = "array", nil
			p["links"].Items.Properties["kind"].Enum = []any{"took_from", "led_to", "chose", "rejected", "blocks", "relates"}
		}),
		Description: "Record a decision or finding for others."}, s.note)
	addTool(srv, &sdk.Tool{Name: "snag_report", OutputSchema: outSchema[sentOut](), Annotations: writes("Report progress", false),
		Description: "Tell people and agents what you did."}, s.report)
	addTool(srv, &sdk.Tool{Name: "snag_handoff", OutputSchema: outSchema[sentOut](), Annotations: writes("Hand off", false),
		Description: "Leave work for an agent by name."}, s.handoff)
}

// quoted is text an agent wrote, framed as data on one line.
func quoted(s string, n int) string { return strconv.Quote(oneLine(s, n)) }

// leftOf is the seconds a claim has left at now.
func leftOf(c snag.FileClaim, now time.Time) int { return max(0, int(c.Expires.Sub(now).Seconds())) }

func claimRows(cs []snag.FileClaim, now time.Time) []claimOutRow {
	out := make([]claimOutRow, len(cs))
	for i, c := range cs {
		out[i] = claimOutRow{Path: c.Path, Holder: c.Holder, Exclusive: c.Exclusive, LeftSec: leftOf(c, now)}
	}
	return out
}

// pathsOf lists claims' paths, with "(shared)" on shared ones.
func pathsOf(cs []snag.FileClaim) []string {
	var out []string
	for _, c := range cs {
		p := c.Path
		if !c.Exclusive {
			p += " (shared)"
		}
		out = append(out, p)
	}
	return out
}

// RowOf is a task of snagd's API as the tools show it.
func RowOf(t snag.Task) Row {
	return Row{Key: t.Key, ID: t.ID, Title: t.Title, Status: string(t.Status), Trust: string(t.Trust),
		Severity: string(t.Severity), Kind: string(t.Kind), Wave: t.Wave, Plan: t.Plan, Assignee: t.Assignee,
		File: t.File, BlockedBy: t.BlockedBy, Path: t.Path}
}

func (s *server) fileClaims(ctx context.Context, req *sdk.CallToolRequest, in filesIn) (*sdk.CallToolResult, filesOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_files"), in.Agent)
	act, ok := fileActions[in.Action]
	if !ok {
		return nil, filesOut{}, fmt.Errorf("action %q: use claim, release or check", in.Action)
	}
	if in.Action != "release" && len(in.Paths) == 0 {
		return nil, filesOut{}, fmt.Errorf("%s needs paths: repository-relative paths or globs, like [\"web/app.ts\", \"web/**/*.css\"]", in.Action)
	}
	now := time.Now()
	var a filesAnswer
	advice, err := s.teamCall(ctx, func(t Team) (err error) { a, err = act(ctx, t, in, now); return err })
	if err != nil {
		return nil, filesOut{}, err
	}
	if advice != "" {
		return &sdk.CallToolResult{Content: text(advice)}, filesOut{Source: SourceFiles, Advisory: advice}, nil
	}
	a.out.Source = SourceDaemon
	return &sdk.CallToolResult{Content: text(a.msg), IsError: a.refused}, a.out, nil
}

// filesAnswer is what a snag_files action answers: the structured
// content (but its source), the text a model reads, and whether that
// text is a refusal.
type filesAnswer struct {
	out     filesOut
	msg     string
	refused bool
}

// fileActions are snag_files's actions, each on the team backend t at
// now.
var fileActions = map[string]func(ctx context.Context, t Team, in filesIn, now time.Time) (filesAnswer, error){
	"claim":   claimFiles,
	"release": releaseFiles,
	"check":   checkFiles,
}

// claimFiles claims in.Paths, all or none: exclusive unless asked
// otherwise, renewed when held already; refused, naming the claims in the
// way, when others hold them.
func claimFiles(ctx context.Context, t Team, in filesIn, now time.Time) (filesAnswer, error) {
	shared := in.Exclusive != nil && !*in.Exclusive
	got, err := t.ClaimFiles(ctx, ops.FilesRequest{Paths: in.Paths, Task: in.Task, TTLSec: in.TTLSec, Shared: shared})
	if err != nil {
		return filesAnswer{}, err
	}
	out := filesOut{Granted: got.Granted, Claims: claimRows(got.Claims, now), Conflicts: claimRows(got.Conflicts, now)}
	if !got.Granted {
		msg := got.Message + ". Work on other files, ask the holder (snag_handoff), or wait for the claim to end."
		if len(got.Late) > 0 {
			msg = got.Message
		}
		return filesAnswer{out: out, msg: msg, refused: true}, nil
	}
	verb := "claimed"
	if got.Renewed == len(got.Claims) {
		verb = "renewed"
	}
	left := 0
	if len(got.Claims) > 0 {
		left = leftOf(got.Claims[0], now)
	}
	msg := fmt.Sprintf("%s %s for %d s (%s): renew by claiming again before then; snag_files {\"action\": \"release\"} when done",
		verb, strings.Join(pathsOf(got.Claims), ", "), left, mode(got.Claims))
	return filesAnswer{out: out, msg: msg}, nil
}

// releaseFiles releases the agent's claims of in.Paths, or all of them.
func releaseFiles(ctx context.Context, t Team, in filesIn, now time.Time) (filesAnswer, error) {
	got, err := t.ReleaseFiles(ctx, in.Paths)
	if err != nil {
		return filesAnswer{}, err
	}
	msg := "released " + strings.Join(pathsOf(got.Released), ", ")
	if len(got.Released) == 0 {
		msg = "you held no such claim: nothing to release"
	}
	return filesAnswer{out: filesOut{Granted: true}, msg: msg}, nil
}

// checkFiles says of each path of in.Paths whether it is free, or who
// holds it.
func checkFiles(ctx context.Context, t Team, in filesIn, now time.Time) (filesAnswer, error) {
	got, err := t.CheckFiles(ctx, in.Paths)
	if err != nil {
		return filesAnswer{}, err
	}
	out := filesOut{Granted: true}
	var lines []string
	for _, c := range got.Checks {
		out.Conflicts = append(out.Conflicts, claimRows(c.Claims, now)...)
		lines = append(lines, checkLine(c, now))
	}
	return filesAnswer{out: out, msg: strings.Join(lines, "\n")}, nil
}

// checkLine is one path as snag_files's check answers it: free, or each
// holder of a claim over it, the claim's mode and the seconds it has left.
func checkLine(c ops.FilesCheck, now time.Time) string {
	if len(c.Claims) == 0 {
		return c.Path + ": free"
	}
	var hs []string
	for _, h := range c.Claims {
		kind := "exclusive"
		if !h.Exclusive {
			kind = "shared"
		}
		hs = append(hs, fmt.Sprintf("%s holds %s (%s, %d s left)", h.Holder, h.Path, kind, leftOf(h, now)))
	}
	return c.Path + ": " + strings.Join(hs, "; ")
}

// mode says whether claims are exclusive or shared.
func mode(cs []snag.FileClaim) string {
	if len(cs) > 0 && !cs[0].Exclusive {
		return "shared"
	}
	return "exclusive"
}

func (s *server) report(ctx context.Context, req *sdk.CallToolRequest, in reportIn) (*sdk.CallToolResult, sentOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_report"), in.Agent)
	var m snag.Message
	advice, err := s.teamCall(ctx, func(t Team) (err error) {
		m, err = t.Report(ctx, ops.ReportRequest{Message: in.Message, Task: in.Task, Detail: in.Detail})
		return err
	})
	if err != nil {
		return nil, sentOut{}, err
	}
	if advice != "" {
		return &sdk.CallToolResult{Content: text(advice)}, sentOut{Source: SourceFiles, Advisory: advice}, nil
	}
	return &sdk.CallToolResult{Content: text("reported: people see it on the board, the other agents in their snag_context")},
		sentOut{Source: SourceDaemon, ID: m.ID}, nil
}

func (s *server) handoff(ctx context.Context, req *sdk.CallToolRequest, in handoffIn) (*sdk.CallToolResult, sentOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_handoff"), in.Agent)
	var h ops.HandedOff
	advice, err := s.teamCall(ctx, func(t Team) (err error) {
		h, err = t.Handoff(ctx, ops.HandoffRequest{To: in.To, Title: in.Title, Body: in.Body, Task: in.Task})
		return err
	})
	if err != nil {
		return nil, sentOut{}, err
	}
	if advice != "" {
		return &sdk.CallToolResult{Content: text(advice)}, sentOut{Source: SourceFiles, Advisory: advice}, nil
	}
	to := strings.ToUpper(strings.TrimSpace(in.To))
	msg := "left for " + to + ": they see it in their next snag_context"
	switch {
	case h.Moved:
		msg = fmt.Sprintf("%s is %s's now (epoch %d): you no longer hold it. %s", h.Key, to, h.Epoch, msg)
	case !h.Live:
		msg += " (" + to + " is not connected now: it waits for them)"
	case h.Host != "":
		msg += " (" + to + " is connected on " + h.Host + ")"
	}
	return &sdk.CallToolResult{Content: text(msg)}, sentOut{Source: SourceDaemon, ID: h.Message.ID, Moved: h.Moved, Epoch: h.Epoch}, nil
}
