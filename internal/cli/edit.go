package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

// A person's everyday changes of tasks: edit its fields, mark it done,
// change what it depends on, and see what an agent would get next.

func init() {
	register(&command{
		name: "edit", daemon: true, args: "ID [--title T] [--severity S] [--kind K] [--wave N] [--plan P] [--file PATH[:A-B]]... [--no-files] [--json]",
		summary: "Change a task's fields. Only the values that change are rewritten in its file; comments, order and the body stay.\n\n" +
			"--file replaces the suspect files (repeat it for several); --no-files removes them;\n" +
			"--plan '' takes the task out of its plan. Dependencies change with snag dep;\n" +
			"the status with snag done, cancel, reopen and release.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.StringVar(&c.opt.title, "title", "", "the new title")
			fs.StringVar(&c.opt.severity, "severity", "", "severity: "+joinEnum(queue.Severities))
			fs.StringVar(&c.opt.kind, "kind", "", "kind: "+joinEnum(queue.Kinds))
			fs.IntVar(&c.opt.wave, "wave", 0, "plan order: lower waves are handed out first")
			fs.StringVar(&c.opt.plan, "plan", "", "the plan's slug; '' takes the task out of its plan")
			fs.Var(&c.opt.files, "file", "a suspect file, path or path:A-B (repeatable; replaces the list)")
			fs.BoolVar(&c.opt.noFiles, "no-files", false, "remove the suspect files")
			fs.BoolVar(&c.opt.json, "json", false, "print what changed as JSON")
		},
		run: runEdit,
	})
	done := &command{
		name: "done", args: "ID... [--reason TEXT] [--json]", daemon: true,
		summary: "Resolve tasks as a person: open, claimed, verifying or needs_review -> resolved, not verified.\n\n" +
			"A person's word, not a check: verified stays false, the holder's lease ends and a\n" +
			"check still running is stopped. To have snag check a task instead, use snag verify.\n" +
			"snag resolve is the same command.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.StringVar(&c.opt.reason, "reason", "", "why, for the audit log")
			fs.BoolVar(&c.opt.json, "json", false, "print the tasks moved as JSON")
		},
	}
	done.run = func(ctx context.Context, c *call) error { return runMoveAs(ctx, c, queue.ActAccept, c.cmd.name) }
	register(done)
	resolve := *done
	resolve.name = "resolve"
	resolve.summary = strings.Replace(done.summary, "snag resolve is the same command.", "snag done is the same command.", 1)
	register(&resolve)
	register(&command{
		name: "dep", daemon: true, args: "add ID DEP... | rm ID DEP... | tree ID [--json]",
		summary: "Change what a task depends on, or show its dependency tree.\n\n" +
			"snag dep add SNAG-9 SNAG-7: SNAG-9 waits for SNAG-7 (it must exist, and close no cycle).\n" +
			"snag dep rm SNAG-9 SNAG-7 takes that back. snag dep tree SNAG-9 shows what SNAG-9\n" +
			"waits for, and what those wait for, with their statuses.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print JSON")
		},
		run: runDep,
	})
	register(&command{
		name: "ready", daemon: true, args: "[--limit N] [--json]",
		summary: "What an agent would get next, in claim order, and why each other open task is not ready.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.IntVar(&c.opt.limit, "limit", 10, "show at most this many ready tasks")
			fs.BoolVar(&c.opt.json, "json", false, "print JSON (see docs/cli.md)")
		},
		run: runReady,
	})
}

// set reports whether the flag name was given.
func (c *call) set(name string) bool {
	found := false
	c.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

func runEdit(ctx context.Context, c *call) error {
	if len(c.args) != 1 {
		return usagef("edit takes one task: snag edit SNAG-12 --severity high")
	}
	if _, err := queue.ParseRef(c.args[0]); err != nil {
		return usagef("%v", err)
	}
	req := api.EditRequest{By: who()}
	if c.set("title") {
		if strings.TrimSpace(c.opt.title) == "" {
			return usagef("edit: --title is empty: say in a few words what is wrong or wanted")
		}
		req.Title = &c.opt.title
	}
	if c.set("severity") {
		sev, err := parseEnum("severity", c.opt.severity, queue.Severities)
		if err != nil {
			return err
		}
		s := string(sev)
		req.Severity = &s
	}
	if c.set("kind") {
		k, err := parseEnum("kind", c.opt.kind, queue.Kinds)
		if err != nil {
			return err
		}
		s := string(k)
		req.Kind = &s
	}
	if c.set("wave") {
		if c.opt.wave < 0 {
			return usagef("--wave: want a whole number from 0")
		}
		req.Wave = &c.opt.wave
	}
	if c.set("plan") {
		req.Plan = &c.opt.plan
	}
	switch {
	case c.opt.noFiles && len(c.opt.files) > 0:
		return usagef("edit: --file and --no-files together: give the files, or remove them all")
	case c.opt.noFiles:
		req.Files = &[]string{}
	case len(c.opt.files) > 0:
		for _, f := range c.opt.files {
			if _, err := queue.ParseFileRef(f); err != nil {
				return usagef("--file: %v", err)
			}
		}
		files := []string(c.opt.files)
		req.Files = &files
	}
	if req.Title == nil && req.Severity == nil && req.Kind == nil && req.Wave == nil && req.Plan == nil && req.Files == nil {
		return usagef("edit: say what to change: --title, --severity, --kind, --wave, --plan, --file or --no-files (snag help edit)")
	}
	return sendEdit(ctx, c, c.args[0], req)
}

// sendEdit sends one edit and prints what changed.
func sendEdit(ctx context.Context, c *call, ref string, req api.EditRequest) error {
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	out, err := r.cl.Edit(ctx, ref, req)
	if err != nil {
		return said(err)
	}
	for _, w := range out.Warnings {
		fmt.Fprintln(c.Stderr, "snag: note: "+safe(w))
	}
	if c.opt.json {
		return writeJSON(c.Stdout, out)
	}
	if len(out.Changed) == 0 {
		fmt.Fprintf(c.Stdout, "%s: nothing changed (its file says so already)\n", out.Task.Key)
		return nil
	}
	for _, ch := range out.Changed {
		fmt.Fprintf(c.Stdout, "%s: %s\n", out.Task.Key, safe(ch))
	}
	return nil
}

func runDep(ctx context.Context, c *call) error {
	if len(c.args) == 0 {
		return usagef("dep takes add, rm or tree: snag dep add SNAG-9 SNAG-7")
	}
	verb, args := c.args[0], c.args[1:]
	for _, a := range args {
		if _, err := queue.ParseRef(a); err != nil {
			return usagef("%v", err)
		}
	}
	switch verb {
	case "add", "rm":
		if len(args) < 2 {
			return usagef("dep %s takes a task and what it depends on: snag dep %s SNAG-9 SNAG-7", verb, verb)
		}
		req := api.EditRequest{By: who()}
		if verb == "add" {
			req.AddDeps = args[1:]
		} else {
			req.RemoveDeps = args[1:]
		}
		return sendEdit(ctx, c, args[0], req)
	case "tree":
		if len(args) != 1 {
			return usagef("dep tree takes one task: snag dep tree SNAG-9")
		}
		return runDepTree(ctx, c, args[0])
	}
	return usagef("dep: unknown %q: use add, rm or tree (snag help dep)", verb)
}

// depNode is one task of snag dep tree --json.
type depNode struct {
	Ref       string       `json:"ref"` // the depends_on entry, or the task asked for
	Key       string       `json:"key,omitempty"`
	Title     string       `json:"title,omitempty"`
	Status    queue.Status `json:"status,omitempty"`
	Assignee  string       `json:"assignee,omitempty"`
	Missing   bool         `json:"missing,omitempty"` // no task answers to Ref
	Repeated  bool         `json:"repeated,omitempty"`
	DependsOn []depNode    `json:"depends_on,omitempty"`
	task      *api.TaskDetail
}

// maxTree bounds the tasks snag dep tree reads.
const maxTree = 500

func runDepTree(ctx context.Context, c *call, arg string) error {
	r, err := connect(ctx, c, false)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var read func(entry string, depth int) (depNode, error)
	read = func(entry string, depth int) (depNode, error) {
		n := depNode{Ref: entry}
		ref, err := queue.ParseRef(entry)
		if err != nil {
			n.Missing = true
			return n, nil
		}
		d, err := r.get(ctx, entry, ref)
		if err != nil {
			if depth == 0 {
				return n, err
			}
			n.Missing = true
			return n, nil
		}
		n.Key, n.Title, n.Status, n.Assignee = d.Row.Key, d.Row.Title, d.Row.Status, d.Row.Assignee
		if n.Status.Terminal() {
			n.Assignee = ""
		}
		if seen[d.Row.ID] || len(seen) >= maxTree {
			n.Repeated = true
			return n, nil
		}
		seen[d.Row.ID] = true
		if d.Task != nil {
			for _, dep := range d.Task.DependsOn {
				child, err := read(dep, depth+1)
				if err != nil {
					return n, err
				}
				n.DependsOn = append(n.DependsOn, child)
			}
		}
		return n, nil
	}
	root, err := read(arg, 0)
	if err != nil {
		return err
	}
	if c.opt.json {
		return writeJSON(c.Stdout, root)
	}
	writeTree(c.Stdout, root, "", "")
	if len(root.DependsOn) == 0 {
		fmt.Fprintf(c.Stdout, "%s depends on nothing: snag dep add %s ID adds a dependency\n", root.Key, root.Key)
	}
	return nil
}

// writeTree prints n and, indented below it, what it depends on.
func writeTree(w io.Writer, n depNode, lead, childLead string) {
	var line string
	switch {
	case n.Missing:
		line = safe(n.Ref) + "  [missing: no task has it; snag dep rm removes it]"
	default:
		line = safe(n.Key) + "  " + string(n.Status)
		if n.Assignee != "" {
			line += " @" + safe(n.Assignee)
		}
		line += "  " + safe(clip(n.Title, 60))
		if n.Repeated {
			line += "  (shown above)"
		}
	}
	fmt.Fprintln(w, lead+line)
	for i, ch := range n.DependsOn {
		if i == len(n.DependsOn)-1 {
			writeTree(w, ch, childLead+"└─ ", childLead+"   ")
		} else {
			writeTree(w, ch, childLead+"├─ ", childLead+"│  ")
		}
	}
}

// readyJSON is the stable shape of snag ready --json.
type readyJSON struct {
	// Ready are the tasks claim-next hands out, in its order: an agent's
	// snag_claim {} takes the first.
	Ready []api.Task `json:"ready"`
	// NotReady are the other open tasks, each with why.
	NotReady []notReady `json:"not_ready"`
	// Inbox counts what waits for a person to promote it.
	Inbox  int    `json:"inbox"`
	Source string `json:"source"`
}

type notReady struct {
	api.Task
	Why string `json:"why"`
}

func runReady(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("ready takes no arguments: snag ready")
	}
	if c.opt.limit <= 0 {
		return usagef("--limit: want a number from 1")
	}
	r, err := connect(ctx, c, false)
	if err != nil {
		return err
	}
	// Every live task, for the statuses of what blocks the open ones.
	var live []api.Task
	q := api.ListQuery{Limit: 1000}
	for {
		page, _, err := r.list(ctx, q)
		if err != nil {
			return err
		}
		live = append(live, page.Tasks...)
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	byKey := map[string]*api.Task{}
	for i := range live {
		byKey[live[i].Key] = &live[i]
	}
	out := readyJSON{Ready: []api.Task{}, NotReady: []notReady{}, Source: r.source()}
	for _, t := range live {
		switch t.Status {
		case queue.StatusInbox:
			out.Inbox++
			continue
		case queue.StatusOpen:
		default:
			continue
		}
		for _, b := range t.BlockedBy {
			if _, ok := byKey[b]; !ok {
				// Not live: cancelled (which blocks for ever), or no task.
				gone := api.Task{Key: b, Status: "missing"}
				if ref, err := queue.ParseRef(b); err == nil {
					if d, err := r.get(ctx, b, ref); err == nil {
						gone = d.Row
					}
				}
				byKey[b] = &gone
			}
		}
		if why := notReadyWhy(t, byKey); why != "" {
			out.NotReady = append(out.NotReady, notReady{t, why})
			continue
		}
		out.Ready = append(out.Ready, t)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, out)
	}
	switch n := len(out.Ready); {
	case n == 0 && len(out.NotReady) == 0:
		fmt.Fprintln(c.Stdout, "nothing is ready: no task is open")
	case n == 0:
		fmt.Fprintln(c.Stdout, "nothing is ready: an agent's claim would find no task")
	default:
		fmt.Fprintln(c.Stdout, "ready, in the order agents get them (snag_claim {} takes the first):")
		writeTable(c.Stdout, out.Ready[:min(n, c.opt.limit)])
		if n > c.opt.limit {
			fmt.Fprintf(c.Stdout, "… %d more ready (raise --limit)\n", n-c.opt.limit)
		}
	}
	if len(out.NotReady) > 0 {
		fmt.Fprintln(c.Stdout, "\nnot ready:")
		width := 0
		for _, t := range out.NotReady {
			width = max(width, len(orKey(&t.Task)))
		}
		for _, t := range out.NotReady {
			fmt.Fprintf(c.Stdout, "  %-*s  %s\n", width, safe(orKey(&t.Task)), safe(t.Why))
		}
	}
	if out.Inbox > 0 {
		fmt.Fprintf(c.Stdout, "\n%d in the inbox wait for a person (snag list --status inbox; snag promote ID)\n", out.Inbox)
	}
	return nil
}

// notReadyWhy says why an open task is not handed out, or "" when it is.
func notReadyWhy(t api.Task, byKey map[string]*api.Task) string {
	switch {
	case t.State != api.StateOK && !t.Stale:
		return "its file does not read cleanly (" + t.State + "): snag doctor says how to mend it"
	case t.State != api.StateOK:
		return "its file no longer parses (shown: its last good data): snag doctor says how to mend it"
	case t.Duplicate:
		return "another file has the same id or key: snag doctor names both"
	case t.HeldIn != "":
		return "held by " + t.Assignee + " in " + filepath.Base(t.HeldIn) + " (another worktree)"
	case t.HeldOn != "":
		return "held by " + t.Assignee + " on " + t.HeldOn + " (another clone)"
	case len(t.BlockedBy) > 0:
		parts := make([]string, len(t.BlockedBy))
		for i, b := range t.BlockedBy {
			parts[i] = b
			switch dep := byKey[b]; {
			case dep == nil || dep.Status == "missing":
				parts[i] += " (no such task: snag dep rm " + t.Key + " " + b + ")"
			case dep.Status == queue.StatusCancelled:
				parts[i] += " (cancelled: snag dep rm " + t.Key + " " + b + ", or reopen it)"
			default:
				parts[i] += " (" + string(dep.Status)
				if dep.Assignee != "" {
					parts[i] += " @" + dep.Assignee
				}
				parts[i] += ")"
			}
		}
		return "blocked by " + strings.Join(parts, ", ")
	}
	return ""
}
