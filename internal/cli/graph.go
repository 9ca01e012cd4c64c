package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/atomicfile"
	"github.com/snagdev/snag/internal/graphdraw"
)

func init() {
	register(&command{
		name: "link", args: "FROM KIND TO [--why TEXT] [--json]",
		summary: "Add an edge of the decision graph: snag link N-5 chose N-3 --why \"simpler\".\n\n" +
			"KIND is took_from, led_to, chose, rejected, blocks or relates. The edge is written in the\n" +
			"file of the note it starts from (FROM), in this worktree; a link that is there already\n" +
			"changes nothing. took_from, led_to and blocks follow time: a link that would close a cycle\n" +
			"of them is refused.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.String("why", "", "why, in a line")
			fs.BoolVar(&c.opt.json, "json", false, "print the note linked from, with its edges (POST /links's answer), as JSON")
		},
		daemon: true,
		run:    runLink,
	})
	register(&command{
		name: "graph", args: "[--format text|dot|svg|mermaid] [--branch B] [--type T] [--task KEY] [-o FILE] [--json]",
		summary: "Print the decision graph: the notes and their links, or the part a branch, type or task picks.\n\n" +
			"text (the default) lists each note with its links under it. dot is Graphviz's (dot -Tpng),\n" +
			"svg a picture that needs nothing else, mermaid a flowchart for markdown. -o writes to a file;\n" +
			"with no --format, a file name ending .svg, .dot, .gv or .mmd says which.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.String("format", "", "text, dot, svg or mermaid (default text)")
			fs.String("branch", "", "only the notes written on this git branch")
			typeFlag(fs, c)
			fs.StringVar(&c.opt.task, "task", "", "only the notes about this task (its key, SNAG-3)")
			fs.String("o", "", "write to this file instead of standard output")
			fs.BoolVar(&c.opt.json, "json", false, "print GET /graph as JSON")
		},
		daemon: true,
		run:    runGraph,
	})
	register(&command{
		name: "activity", args: "[--branches N] [--json]",
		summary: "Show what the team is doing now and, branch by branch, what it did lately.\n\n" +
			"First the task leases, file claims and branch write leases live now; then each branch's latest\n" +
			"activity over the last 7 days (notes written, tasks claimed and resolved, its last report), the\n" +
			"most recent branch first.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.Int("branches", 20, "at most this many branches (1 to 200)")
			fs.BoolVar(&c.opt.json, "json", false, "print GET /branches (what is live, and the activity by branch) as JSON")
		},
		daemon: true,
		run:    runActivity,
	})
}

func runLink(ctx context.Context, c *call) error {
	if len(c.args) != 3 {
		return usagef(`link takes a note, a kind and a note: snag link N-5 chose N-3 --why "simpler"`)
	}
	kind, err := linkKind(c.args[1])
	if err != nil {
		return err
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	req := api.LinkRequest{From: c.args[0], To: c.args[2], Kind: kind, Why: flagString(c, "why"), Worktree: r.worktree(), By: who()}
	d, err := r.cl.Link(ctx, req)
	if err != nil {
		return said(err)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, d)
	}
	l := api.Link{To: strings.ToUpper(strings.TrimSpace(req.To)), Kind: kind, Why: req.Why}
	for _, got := range d.Links {
		if got.Kind == kind && strings.EqualFold(got.To, l.To) {
			l = got
		}
	}
	// N-5 chose N-3 "simpler" (vetted) in .snag/notes/N-5 - ….md
	fmt.Fprintf(c.Stdout, "%s %s in %s\n", safe(d.Key), strings.TrimPrefix(outEdge(l, d.Trust), "-> "), safe(d.File))
	return nil
}

// graphFormats are what snag graph prints, and the file names that say
// which when --format is not given.
var graphExts = map[string]string{".dot": "dot", ".gv": "dot", ".svg": "svg", ".mmd": "mermaid", ".mermaid": "mermaid"}

func runGraph(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("graph takes no arguments, only flags: snag graph --format svg -o graph.svg")
	}
	format, out := strings.ToLower(flagString(c, "format")), flagString(c, "o")
	if format == "" {
		format = graphExts[strings.ToLower(filepath.Ext(out))]
	}
	if _, ok := graphdraw.Formats[format]; !ok && format != "" && format != "text" {
		return usagef("--format: unknown value %q (want one of text, dot, svg, mermaid)", format)
	}
	if c.opt.json && format != "" && format != "text" {
		return usagef("graph: --json prints GET /graph; leave out --format %s", format)
	}
	typ, err := noteType(c)
	if err != nil {
		return err
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	q := api.NoteQuery{Type: typ, Branch: flagString(c, "branch"), Task: c.opt.task}
	g, err := r.cl.Graph(ctx, q)
	if err != nil {
		return said(err)
	}
	if g.Nodes == nil {
		g.Nodes = []api.Note{}
	}
	if g.Links == nil {
		g.Links = []api.Link{}
	}
	var b bytes.Buffer
	switch f, draw := graphdraw.Formats[format]; {
	case c.opt.json:
		writeJSON(&b, g)
	case draw:
		b.Write(f.Draw(graphdraw.Of(graphdraw.Title(q.Type, q.Branch, q.Task), g.Nodes, g.Links)))
	default:
		writeGraphText(&b, g, q)
	}
	if out == "" {
		_, err := c.Stdout.Write(b.Bytes())
		return err
	}
	path := out
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.Dir, path)
	}
	if err := atomicfile.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("graph: write %s: %w", out, err)
	}
	fmt.Fprintf(c.Stdout, "wrote %s: %s, %s\n", safe(out), count(len(g.Nodes), "note", "notes"), count(len(g.Links), "link", "links"))
	return nil
}

// count is "1 note" or "3 notes".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// writeGraphText lists the notes, newest first, each with its links to
// the other notes listed under it.
func writeGraphText(w io.Writer, g api.Graph, q api.NoteQuery) {
	if len(g.Nodes) == 0 {
		fmt.Fprintln(w, noNotes(q))
		return
	}
	out := map[string][]api.Link{}
	trust := map[string]api.Note{}
	for _, n := range g.Nodes {
		trust[n.Key] = n
	}
	for _, l := range g.Links {
		out[l.From] = append(out[l.From], l)
	}
	lines := noteLines(g.Nodes)
	for i, n := range g.Nodes {
		fmt.Fprintln(w, lines[i])
		for _, l := range out[n.Key] {
			fmt.Fprintln(w, "    "+outEdge(l, trust[n.Key].Trust))
		}
	}
	fmt.Fprintf(w, "%s, %s\n", count(len(g.Nodes), "note", "notes"), count(len(g.Links), "link", "links"))
}

func runActivity(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("activity takes no arguments, only flags: snag activity --branches 5")
	}
	n := flagInt(c, "branches")
	if n < 1 || n > 200 {
		return usagef("--branches: want a number from 1 to 200")
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	a, err := r.cl.Activity(ctx, n)
	if err != nil {
		return said(err)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, a)
	}
	writeActivity(c.Stdout, a, time.Now())
	return nil
}

// writeActivity prints what is live, then the activity by branch.
func writeActivity(w io.Writer, a api.ActivityFeed, now time.Time) {
	ago := func(t time.Time) string { return shortAgo(max(now.Sub(t), 0)) + " ago" }
	if len(a.Tasks)+len(a.Files)+len(a.Branches) == 0 {
		fmt.Fprintln(w, "nothing is held now: no task lease, file claim or branch write lease is live")
	}
	if len(a.Tasks) > 0 {
		fmt.Fprintln(w, "tasks held:")
		rows := make([][]string, len(a.Tasks))
		for i, t := range a.Tasks {
			rows[i] = []string{safe(t.Key), safe(t.Holder), "on " + safe(orDash(t.Branch)), "since " + ago(t.Since), clip(safe(t.Title), 50)}
		}
		for _, line := range align(rows) {
			fmt.Fprintln(w, "  "+line)
		}
	}
	if len(a.Files) > 0 {
		fmt.Fprintln(w, "files claimed:")
		var buf bytes.Buffer
		printClaims(&buf, a.Files, "")
		for _, line := range strings.SplitAfter(strings.TrimSuffix(buf.String(), "\n"), "\n") {
			fmt.Fprint(w, "  "+safeText(line))
		}
		fmt.Fprintln(w)
	}
	if len(a.Branches) > 0 {
		fmt.Fprintln(w, "branches being written:")
		rows := make([][]string, len(a.Branches))
		for i, b := range a.Branches {
			rows[i] = []string{safe(b.Branch), safe(b.Holder), fmt.Sprintf("%d s left", b.SecondsLeft)}
		}
		for _, line := range align(rows) {
			fmt.Fprintln(w, "  "+line)
		}
	}
	fmt.Fprintln(w)
	if len(a.Recent) == 0 {
		fmt.Fprintln(w, "no branch has had activity in the last 7 days: no note written, no task claimed or resolved")
		return
	}
	for _, b := range a.Recent {
		fmt.Fprintf(w, "%s, %s\n", safe(orDash(b.Branch)), ago(b.Last))
		kv := func(k string, vs []string) {
			if len(vs) > 0 {
				fmt.Fprintf(w, "  %-9s %s\n", k+":", safe(strings.Join(vs, ", ")))
			}
		}
		kv("notes", b.Nodes)
		kv("claimed", b.Claimed)
		kv("resolved", b.Resolved)
		if rp := b.Report; rp != nil {
			fmt.Fprintf(w, "  %-9s %s, %s: %s\n", "report:", safe(rp.Agent), ago(rp.At), safe(clip(rp.Message, 200)))
		}
	}
	total := max(a.BranchesTotal, len(a.Recent))
	fmt.Fprintf(w, "\n%d of %s active in the last 7 days", len(a.Recent), count(total, "branch", "branches"))
	if len(a.Recent) < total {
		fmt.Fprintf(w, ": snag activity --branches %d lists them all", min(total, 200))
	}
	fmt.Fprintln(w)
}
