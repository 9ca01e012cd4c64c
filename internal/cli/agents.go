package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
)

func init() {
	register(&command{
		name: "agents", args: "[--json] | end NAME|ID [--reason TEXT]",
		summary: "List the agents connected to snagd, what each holds and whether it is idle; end one.\n\n" +
			"Each session shows its name, transport, client and what it is doing: an MCP client over\n" +
			"HTTP that went away without ending its session shows as idle, with the time snagd ends it.\n\n" +
			"snag agents end NAME ends a session now: its tasks go back to the queue (released, with\n" +
			"the reason in the audit log) and its client must connect again.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print GET /sessions as JSON")
			fs.StringVar(&c.opt.reason, "reason", "", "why the session is ended, for the audit log")
		},
		run: runAgents,
	})
}

// agentsJSON is the stable shape of snag agents --json: GET /sessions.
type agentsJSON struct {
	Sessions []api.LiveSession `json:"sessions"`
	Leases   []api.Lease       `json:"leases"`
	// Files are the live file claims (GET /files).
	Files []api.FileClaim `json:"files"`
	// Reports are the latest reports, newest first (GET /reports).
	Reports []api.Message `json:"reports"`
}

func runAgents(ctx context.Context, c *call) error {
	end := len(c.args) > 0 && c.args[0] == "end"
	switch {
	case end && len(c.args) != 2:
		return usagef("agents end takes one agent: snag agents end VESPER (snag agents lists them)")
	case !end && len(c.args) > 0:
		return usagef("agents: unknown argument %q (want snag agents, or snag agents end NAME)", c.args[0])
	}
	r, err := running(ctx, c)
	if err != nil {
		return err
	}
	if r.cl == nil {
		if end {
			return fmt.Errorf("no snagd serves %s, so no agent is connected", r.root)
		}
		fmt.Fprintf(c.Stdout, "no snagd serves %s, so no agent is connected\n", r.root)
		return nil
	}
	live, err := r.cl.Sessions(ctx)
	if err != nil {
		return said(err)
	}
	got := agentsJSON{Sessions: live.Sessions, Leases: live.Leases}
	if end {
		return endAgent(ctx, c, r, got, c.args[1])
	}
	if err := addClaimsAndReports(ctx, r, &got); err != nil {
		return err
	}
	if c.opt.json {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Stdout, "%s\n", b)
		return nil
	}
	writeAgents(c.Stdout, got, taskKeys(ctx, r))
	return nil
}

// addClaimsAndReports adds the live file claims and the latest reports
// to what snag agents shows.
func addClaimsAndReports(ctx context.Context, r *remote, got *agentsJSON) error {
	files, err := r.cl.Files(ctx)
	if err != nil {
		return said(err)
	}
	reports, err := r.cl.Reports(ctx, api.MessageQuery{Limit: 50})
	if err != nil {
		return said(err)
	}
	got.Files, got.Reports = files.Claims, reports.Messages
	return nil
}

// taskKeys names a task by its key, asking snagd once per id, or by its
// id when snagd does not say.
func taskKeys(ctx context.Context, r *remote) func(id string) string {
	keys := map[string]string{}
	return func(id string) string {
		if k, ok := keys[id]; ok {
			return k
		}
		keys[id] = id
		if d, err := r.cl.Get(ctx, id); err == nil && d.Row.Key != "" {
			keys[id] = d.Row.Key
		}
		return keys[id]
	}
}

// writeAgents prints each session, what it holds, its file claims and
// its latest report, then the detached leases; key names a task.
func writeAgents(w io.Writer, got agentsJSON, key func(id string) string) {
	held := map[int64][]string{}
	var detached []string
	for _, l := range got.Leases {
		if l.Detached {
			detached = append(detached, key(l.TaskID)+" ("+l.Holder+")")
			continue
		}
		held[l.SessionID] = append(held[l.SessionID], key(l.TaskID))
	}
	if len(got.Sessions) == 0 {
		fmt.Fprintln(w, "no agent is connected: agents connect with snag mcp (snag install sets it up)")
	}
	now := time.Now()
	for _, s := range got.Sessions {
		writeAgent(w, s, held[s.ID], got, now)
	}
	if len(detached) > 0 {
		fmt.Fprintf(w, "detached: %s: each goes to an agent that connects under its name (SNAG_AGENT), or snag release frees it\n",
			strings.Join(detached, ", "))
	}
}

// writeAgent prints one session: who it is, whether it is idle, the
// tasks it holds (by key), its file claims and its latest report.
func writeAgent(w io.Writer, s api.LiveSession, holds []string, got agentsJSON, now time.Time) {
	client := s.Client
	if s.ClientVersion != "" {
		client += " " + s.ClientVersion
	}
	holding := "holds nothing"
	if len(holds) > 0 {
		holding = "holds " + strings.Join(holds, ", ")
	}
	state := "active"
	if s.Activity.Idle {
		state = "IDLE"
	}
	fmt.Fprintf(w, "%-8s %-5s %s  %s, since %s, %s\n", s.Name, s.Transport, state, client,
		shortAgo(now.Sub(s.Started)), holding)
	fmt.Fprintf(w, "         session %d: %s\n", s.ID, s.Activity.Note)
	var mine []api.FileClaim
	for _, f := range got.Files {
		if f.SessionID == s.ID {
			mine = append(mine, f)
		}
	}
	printClaims(w, mine, "         files: ")
	for _, m := range got.Reports {
		if m.From == s.Name {
			fmt.Fprintf(w, "         said %s ago: %q\n", shortAgo(now.Sub(m.Created)), m.Body)
			break
		}
	}
}

// endAgent ends the live session named by name (or its id).
func endAgent(ctx context.Context, c *call, r *remote, got agentsJSON, name string) error {
	var id int64
	for _, s := range got.Sessions {
		if strings.EqualFold(s.Name, name) || strconv.FormatInt(s.ID, 10) == name {
			id = s.ID
		}
	}
	if id == 0 {
		return fmt.Errorf("no connected agent is %s: snag agents lists them", name)
	}
	ended, err := r.cl.EndSession(ctx, id, api.EndRequest{By: who(), Reason: c.opt.reason})
	if err != nil {
		return said(err)
	}
	fmt.Fprintf(c.Stdout, "ended %s's session %d: %d task(s) back in the queue\n", ended.Name, id, ended.Released)
	return nil
}

// shortAgo renders a duration as people read an age: 40s, 12m, 3h, 2d.
func shortAgo(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}
