package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/snagdev/snag/api"
)

func init() {
	register(&command{
		name: "plans", args: "[--json] | show SLUG | new TITLE [--body TEXT] | activate|done|archive|draft SLUG",
		summary: "List, read and write plans (.snag/plans/SLUG.md): goals and waves that tasks name with plan: SLUG.\n\n" +
			"A plan an agent drafts (snag_plan) is unvetted until a person activates it, as promotion vets an\n" +
			"inbox item; snag plans activate SLUG does that. Each plan is listed with its tasks by status.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print GET /plans (or the plan) as JSON")
			fs.StringVar(&c.opt.body, "body", "", "a new plan's markdown")
		},
		daemon: true,
		run:    runPlans,
	})
}

// planVerbs are the snag plans subcommands that set a status.
var planVerbs = map[string]string{"activate": "active", "done": "done", "archive": "archived", "draft": "draft"}

func runPlans(ctx context.Context, c *call) error {
	verb := "list"
	if len(c.args) > 0 {
		verb = c.args[0]
	}
	_, setter := planVerbs[verb]
	switch {
	case verb == "list" && len(c.args) > 1,
		(verb == "show" || setter) && len(c.args) != 2,
		verb == "new" && len(c.args) != 2:
		return usagef("plans: snag plans, snag plans show SLUG, snag plans new TITLE [--body TEXT], snag plans activate|done|archive|draft SLUG")
	case verb != "list" && verb != "show" && verb != "new" && !setter:
		return usagef("plans: unknown subcommand %q (want show, new, activate, done, archive or draft)", verb)
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	var d api.PlanDetail
	switch {
	case verb == "list":
		got, err := r.cl.Plans(ctx)
		if err != nil {
			return said(err)
		}
		if c.opt.json {
			return writeJSON(c.Stdout, got)
		}
		if len(got.Plans) == 0 {
			fmt.Fprintln(c.Stdout, "no plans yet: snag plans new TITLE writes one")
		}
		for _, p := range got.Plans {
			fmt.Fprintln(c.Stdout, planSummary(p))
		}
		return nil
	case verb == "show":
		d, err = r.cl.Plan(ctx, c.args[1])
	case verb == "new":
		title, body := c.args[1], c.opt.body
		d, err = r.cl.CreatePlan(ctx, api.PlanRequest{Title: &title, Body: &body, By: who()})
	default:
		d, err = r.cl.UpdatePlan(ctx, c.args[1], api.PlanRequest{Status: planVerbs[verb], By: who()})
	}
	if err != nil {
		return said(err)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, d)
	}
	switch verb {
	case "new":
		fmt.Fprintf(c.Stdout, "wrote %s (draft): snag plans activate %s when it is ready\n", d.File, d.Slug)
	case "show":
		fmt.Fprintln(c.Stdout, planSummary(d.Plan))
		fmt.Fprintf(c.Stdout, "%s\n\n%s", d.File, d.Body)
	default:
		fmt.Fprintln(c.Stdout, planSummary(d.Plan))
	}
	return nil
}

// planSummary is one plan on one line: slug, status, trust, title and its
// tasks by status.
func planSummary(p api.Plan) string {
	if p.Problem != "" {
		return p.Slug + ": does not parse: " + p.Problem
	}
	s := fmt.Sprintf("%-20s %-8s %s", p.Slug, p.Status, p.Title)
	if p.Trust != "vetted" {
		s += " (unvetted"
		if p.Author != "" {
			s += ", by " + p.Author
		}
		s += ")"
	}
	var counts []string
	for _, st := range []string{"claimed", "verifying", "needs_review", "open", "inbox", "resolved", "cancelled"} {
		if n := p.Tasks[st]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(counts) > 0 {
		s += ": " + strings.Join(counts, ", ")
	}
	return s
}
