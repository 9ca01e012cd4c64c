package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/queue"
)

func init() {
	register(&command{
		name: "init", args: "[--nested]",
		summary: "Create .snag/ in the current folder: tasks/, plans/, notes/, shots/, config.json and a .gitignore.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.nested, "nested", false, "make a project here though a folder above is one")
		},
		run: runInit,
	})
	register(&command{
		name: "add", daemon: true, args: "TITLE [--kind K] [--severity S] [--wave N] [--plan P] [--file PATH[:A-B]]... [--depends ID]... [--body TEXT | --body -]",
		summary: "Add a task to the queue: vetted and open, as a person's task is. Prints its alias.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.StringVar(&c.opt.kind, "kind", "", "kind: "+joinEnum(queue.Kinds)+" (default bug)")
			fs.StringVar(&c.opt.severity, "severity", "", "severity: "+joinEnum(queue.Severities)+" (default medium)")
			fs.IntVar(&c.opt.wave, "wave", 0, "plan order: lower waves first (default 1)")
			fs.StringVar(&c.opt.plan, "plan", "", "the plan the task belongs to")
			fs.Var(&c.opt.files, "file", "a suspect file, path or path:A-B (repeatable)")
			fs.Var(&c.opt.depends, "depends", "a task this one depends on (repeatable)")
			fs.StringVar(&c.opt.body, "body", "", "the task's markdown body; - reads it from standard input")
			fs.BoolVar(&c.opt.json, "json", false, "print the new task as JSON")
		},
		run: runAdd,
	})
	register(&command{
		name: "list", daemon: true, args: "[--status S] [--wave N] [--kind K] [--plan P] [--all] [--limit N] [--json]",
		summary: "List tasks in queue order (wave, severity, age). Resolved and cancelled ones only with --all.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.StringVar(&c.opt.status, "status", "", "only these statuses, comma-separated: "+joinEnum(queue.Statuses))
			fs.IntVar(&c.opt.wave, "wave", 0, "only this wave")
			fs.StringVar(&c.opt.kind, "kind", "", "only this kind")
			fs.StringVar(&c.opt.plan, "plan", "", "only this plan")
			fs.BoolVar(&c.opt.all, "all", false, "include resolved and cancelled tasks")
			fs.IntVar(&c.opt.limit, "limit", 100, "at most this many tasks")
			fs.StringVar(&c.opt.cursor, "cursor", "", "continue a previous --json list from its next value")
			fs.BoolVar(&c.opt.json, "json", false, "print JSON (see docs/cli.md)")
		},
		run: runList,
	})
	register(&command{
		name: "show", daemon: true, args: "ID [--json]",
		summary: "Show one task in full: its fields, where its file is, and its body.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print JSON (see docs/cli.md)")
		},
		run: runShow,
	})
	register(&command{
		name: "search", daemon: true, args: "QUERY [--limit N] [--json]",
		summary: "Full-text search over every task: titles, bodies, console errors and suspect files.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.IntVar(&c.opt.limit, "limit", 20, "at most this many hits")
			fs.BoolVar(&c.opt.json, "json", false, "print JSON (see docs/cli.md)")
		},
		run: runSearch,
	})
}

func joinEnum[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

func runInit(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("init takes no arguments: run it in the project's root folder")
	}
	if above, err := layout.Find(filepath.Dir(absOr(c.Dir))); err == nil && !c.opt.nested {
		// Commands run here would use the new .snag/, not the project's:
		// almost always a mistake.
		return fmt.Errorf("%s is inside the snag project at %s: its commands already work here (nothing was created); "+
			"to make a separate project in this folder anyway, run snag init --nested", absOr(c.Dir), above)
	}
	res, err := layout.Init(c.Dir)
	if err != nil {
		return err
	}
	if len(res.Created) == 0 {
		fmt.Fprintf(c.Stdout, "%s/.snag already exists; nothing to do\n", res.Root)
		return nil
	}
	for _, p := range res.Created {
		fmt.Fprintln(c.Stdout, "created "+p)
	}
	fmt.Fprint(c.Stdout, `
next:
  snag add "Checkout button does nothing" --kind bug --severity high
  snag list
  git add .snag && git commit -m "Track tasks with snag"
`)
	return nil
}

// absOr is dir made absolute, or dir when it cannot be.
func absOr(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

func runAdd(ctx context.Context, c *call) error {
	if len(c.args) != 1 {
		return usagef(`add takes one title (quote it): snag add "Checkout button does nothing" --kind bug`)
	}
	if strings.TrimSpace(c.args[0]) == "" {
		return usagef(`add: empty title: say in a few words what is wrong or wanted`)
	}
	req := api.AddRequest{Title: c.args[0], Wave: c.opt.wave, Plan: c.opt.plan, Files: c.opt.files, DependsOn: c.opt.depends, By: who()}
	if c.opt.kind != "" {
		k, err := parseEnum("kind", c.opt.kind, queue.Kinds)
		if err != nil {
			return err
		}
		req.Kind = string(k)
	}
	if c.opt.severity != "" {
		sev, err := parseEnum("severity", c.opt.severity, queue.Severities)
		if err != nil {
			return err
		}
		req.Severity = string(sev)
	}
	if c.opt.wave < 0 {
		return usagef("--wave: want a whole number from 0")
	}
	for _, f := range c.opt.files {
		if _, err := queue.ParseFileRef(f); err != nil {
			return usagef("--file: %v", err)
		}
	}
	switch c.opt.body {
	case "-":
		b, err := io.ReadAll(io.LimitReader(c.Stdin, queue.MaxFileSize))
		if err != nil {
			return fmt.Errorf("add: read body: %w", err)
		}
		req.Body = string(b)
	default:
		req.Body = c.opt.body
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	added, err := r.cl.Add(ctx, req)
	if err != nil {
		return said(err)
	}
	for _, w := range added.Warnings {
		fmt.Fprintln(c.Stderr, "snag add: note: "+safe(w))
	}
	if c.opt.json {
		// The stable shape of snag add --json.
		return writeJSON(c.Stdout, struct {
			ID   string `json:"id"`
			Key  string `json:"key"`
			Path string `json:"path"`
		}{added.ID, added.Key, added.Path})
	}
	fmt.Fprintln(c.Stdout, added.Key)
	return nil
}

func parseEnum[T ~string](name, v string, allowed []T) (T, error) {
	for _, a := range allowed {
		if strings.EqualFold(string(a), v) {
			return a, nil
		}
	}
	return "", usagef("--%s: unknown value %q (want one of %s)", name, v, joinEnum(allowed))
}

// listJSON is the stable shape of snag list --json.
type listJSON struct {
	Tasks  []api.Task `json:"tasks"`
	Next   string     `json:"next,omitempty"`
	Source string     `json:"source"` // daemon or files
}

func runList(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("list takes no arguments, only flags: snag list --status open")
	}
	f := api.ListQuery{Wave: c.opt.wave, Plan: c.opt.plan, All: c.opt.all, Limit: c.opt.limit, Cursor: c.opt.cursor}
	if c.opt.status != "" {
		for _, s := range strings.Split(c.opt.status, ",") {
			st, err := parseEnum("status", strings.TrimSpace(s), queue.Statuses)
			if err != nil {
				return err
			}
			f.Statuses = append(f.Statuses, st)
		}
	}
	if c.opt.kind != "" {
		k, err := parseEnum("kind", c.opt.kind, queue.Kinds)
		if err != nil {
			return err
		}
		f.Kind = k
	}
	if c.opt.limit <= 0 {
		return usagef("--limit: want a number from 1")
	}
	r, err := connect(ctx, c, false)
	if err != nil {
		return err
	}
	page, total, err := r.list(ctx, f)
	if err != nil {
		return err
	}
	if c.opt.json {
		if page.Tasks == nil {
			page.Tasks = []api.Task{}
		}
		return writeJSON(c.Stdout, listJSON{Tasks: page.Tasks, Next: page.Next, Source: r.source()})
	}
	if len(page.Tasks) == 0 {
		if total == 0 {
			fmt.Fprintln(c.Stdout, `no tasks yet: snag add "What needs doing" adds one`)
			return nil
		}
		fmt.Fprintln(c.Stdout, emptyList(f))
		return nil
	}
	writeTable(c.Stdout, page.Tasks)
	if page.Next != "" {
		fmt.Fprintf(c.Stdout, "… more: raise --limit (now %d)\n", f.Limit)
	}
	return nil
}

func emptyList(f api.ListQuery) string {
	switch {
	case len(f.Statuses) > 0 || f.Wave > 0 || f.Kind != "" || f.Plan != "":
		return "no tasks match those filters"
	}
	return "no open tasks (snag list --all shows resolved and cancelled ones)"
}

// showJSON is the stable shape of snag show --json.
type showJSON struct {
	*api.Task
	Data     *queue.Task `json:"task,omitempty"`
	Body     string      `json:"body"`
	TaskFile string      `json:"task_file"`
	SHA256   string      `json:"sha256"`
	Source   string      `json:"source"` // daemon or files
	// Verify is the latest verify run, from a daemon, when there was one.
	Verify *verifyAnswer `json:"verify,omitempty"`
}

func runShow(ctx context.Context, c *call) error {
	if len(c.args) != 1 {
		return usagef("show takes one task: snag show SNAG-12")
	}
	ref, err := queue.ParseRef(c.args[0])
	if err != nil {
		return usagef("%v", err) // a malformed reference is a usage mistake
	}
	r, err := connect(ctx, c, false)
	if err != nil {
		return err
	}
	d, err := r.get(ctx, c.args[0], ref)
	if err != nil {
		return err
	}
	var v *verifyAnswer
	if d.Verify != nil {
		a := stateAnswer(*d.Verify)
		v = &a
	}
	if c.opt.json {
		out := showJSON{Task: &d.Row, Data: d.Task, TaskFile: d.TaskFile, SHA256: d.SHA256, Source: r.source(), Verify: v}
		if d.Body != nil {
			out.Body = *d.Body
		}
		return writeJSON(c.Stdout, out)
	}
	writeShow(c.Stdout, d, v)
	if d.Row.State != api.StateOK {
		return errFound
	}
	return nil
}

func runSearch(ctx context.Context, c *call) error {
	if len(c.args) == 0 {
		return usagef("search takes a query: snag search checkout safari")
	}
	r, err := connect(ctx, c, false)
	if err != nil {
		return err
	}
	hits, err := r.search(ctx, strings.Join(c.args, " "), c.opt.limit)
	if err != nil {
		return err
	}
	if c.opt.json {
		return writeJSON(c.Stdout, map[string]any{"hits": hits, "source": r.source()})
	}
	if len(hits) == 0 {
		fmt.Fprintf(c.Stdout, "nothing matches %q\n", strings.Join(c.args, " "))
		return nil
	}
	rows := make([]api.Task, len(hits))
	for i := range hits {
		rows[i] = hits[i].Task
	}
	writeTable(c.Stdout, rows)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func writeJSONCompact(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
