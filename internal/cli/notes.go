package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

func init() {
	register(&command{
		name: "notes", args: "[--type T] [--branch B] [--task KEY] [--limit N] [-q WORDS] [--json] | show N-7",
		summary: "List the notes (.snag/notes), the nodes of the decision graph, newest first; show one.\n\n" +
			"A note is a goal, decision, option, action, observation, outcome or question, written on a git\n" +
			"branch, and links to other notes (snag graph draws them). snagd reads the notes of every worktree\n" +
			"of the repository, so a branch's notes show before it is merged. Agents write notes with snag_note\n" +
			"(unvetted, with their name); people with snag note add, or by hand as markdown files with a key:\n" +
			"N-7 line. Both are committed with the project.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print GET /notes (or the note) as JSON")
			typeFlag(fs, c)
			fs.String("branch", "", "only the notes written on this git branch")
			fs.StringVar(&c.opt.task, "task", "", "only the notes about this task (its key, SNAG-3)")
			fs.IntVar(&c.opt.limit, "limit", 20, "at most this many (1 to 200)")
			fs.String("q", "", "only the notes these words match, best first")
		},
		daemon: true,
		run:    runNotes,
	})
	register(&command{
		name: "note", args: "show N-7 [--json] | add TITLE [--type T] [--body TEXT|-] [--body-file F] [--task KEY] [--file PATH]... [--took-from N-3 [--why TEXT]] [--link KIND:N-4[:WHY]]...",
		summary: "Show one note with its edges both ways, or write one: a node of the decision graph.\n\n" +
			"snag note add writes .snag/notes/N-<n> - TITLE.md in this worktree, vetted, on its git branch.\n" +
			"--took-from names the note the idea came from; --link adds other edges: KIND is one of\n" +
			"took_from, led_to, chose, rejected, blocks, relates, and the note linked to must exist.\n" +
			"snag link adds an edge to a note that is already written.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print the note (GET /notes/{ref}, or POST /notes's answer) as JSON")
			typeFlag(fs, c)
			fs.StringVar(&c.opt.body, "body", "", "the note's markdown; - reads it from standard input")
			fs.String("body-file", "", "read the note's markdown from this file (- for standard input)")
			fs.StringVar(&c.opt.task, "task", "", "a task the note is about (its key, SNAG-3)")
			fs.Var(&c.opt.files, "file", "a file the note is about (repeatable)")
			fs.String("took-from", "", "the note the idea came from: a took_from link (N-3)")
			fs.String("why", "", "what was taken from --took-from, in a line")
			fs.Var(new(multi), "link", "an edge to a note that exists, KIND:N-4 or KIND:N-4:WHY (repeatable)")
		},
		daemon: true,
		run:    runNote,
	})
}

// typeFlag registers --type, a note's type, and --kind, its old name,
// hidden from the flags help lists.
func typeFlag(fs *flag.FlagSet, c *call) {
	fs.StringVar(&c.opt.kind, "type", "", "a note's type: "+strings.Join(queue.NoteTypes, ", "))
	fs.StringVar(&c.opt.kind, "kind", "", "the old name of --type")
	hideFlags(fs, c, "kind")
}

// hideFlags leaves the flags names out of the command's help; they still
// parse. It replaces the usage newCall gives with the same text.
func hideFlags(fs *flag.FlagSet, c *call, names ...string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: snag %s %s\n\n%s\n", c.cmd.name, c.cmd.args, c.cmd.summary)
		shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		shown.SetOutput(w)
		fs.VisitAll(func(f *flag.Flag) {
			for _, n := range names {
				if f.Name == n {
					return
				}
			}
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		})
		var has bool
		shown.VisitAll(func(*flag.Flag) { has = true })
		if has {
			fmt.Fprintln(w, "\nflags:")
			shown.PrintDefaults()
		}
	}
}

// The graph's commands take flags that no other command does; options
// (shared by every command) holds none of them, so they are read back
// from the command's flag set by name.

// flagString is the value of the string flag name.
func flagString(c *call, name string) string { return c.fs.Lookup(name).Value.String() }

// flagInt is the value of the int flag name.
func flagInt(c *call, name string) int { return c.fs.Lookup(name).Value.(flag.Getter).Get().(int) }

// flagList is the values of the repeatable flag name, in order.
func flagList(c *call, name string) []string { return *c.fs.Lookup(name).Value.(*multi) }

// noteType checks the --type a command was given; "" when none was.
func noteType(c *call) (string, error) {
	if c.opt.kind == "" {
		return "", nil
	}
	return parseEnum("type", c.opt.kind, queue.NoteTypes)
}

func runNotes(ctx context.Context, c *call) error {
	show := len(c.args) > 0 && c.args[0] == "show"
	switch {
	case show && len(c.args) != 2:
		return usagef("notes show takes one note: snag notes show N-7")
	case !show && len(c.args) > 0:
		return usagef("notes: unknown argument %q (want snag notes [-q WORDS], or snag notes show N-7)", c.args[0])
	case c.opt.limit < 1 || c.opt.limit > 200:
		return usagef("--limit: want a number from 1 to 200")
	}
	typ, err := noteType(c)
	if err != nil {
		return err
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	if show {
		return showNote(ctx, c, r, c.args[1])
	}
	q := api.NoteQuery{Query: strings.TrimSpace(flagString(c, "q")), Type: typ, Branch: flagString(c, "branch"),
		Task: c.opt.task, Limit: c.opt.limit}
	got, err := r.cl.Notes(ctx, q)
	if err != nil {
		return said(err)
	}
	if got.Notes == nil {
		got.Notes = []api.Note{}
	}
	if c.opt.json {
		return writeJSON(c.Stdout, got)
	}
	if len(got.Notes) == 0 {
		fmt.Fprintln(c.Stdout, noNotes(q))
		return nil
	}
	for _, line := range noteLines(got.Notes) {
		fmt.Fprintln(c.Stdout, line)
	}
	if len(got.Notes) == q.Limit {
		fmt.Fprintf(c.Stdout, "… there may be more: raise --limit (now %d)\n", q.Limit)
	}
	return nil
}

// noNotes says why a list of notes is empty.
func noNotes(q api.NoteQuery) string {
	if q.Query == "" && q.Type == "" && q.Branch == "" && q.Task == "" {
		return `no notes yet: snag note add "TITLE" writes one; agents write them with snag_note`
	}
	var by []string
	if q.Query != "" {
		by = append(by, fmt.Sprintf("match %q", q.Query))
	}
	if q.Type != "" {
		by = append(by, "are of type "+q.Type)
	}
	if q.Branch != "" {
		by = append(by, "were written on branch "+safe(q.Branch))
	}
	if q.Task != "" {
		by = append(by, "are about "+safe(q.Task))
	}
	return "no notes " + strings.Join(by, " and ") + ": snag notes lists them all"
}

func runNote(ctx context.Context, c *call) error {
	verb := ""
	if len(c.args) > 0 {
		verb = c.args[0]
	}
	switch {
	case verb == "show" && len(c.args) == 2:
		r, err := connect(ctx, c, true)
		if err != nil {
			return err
		}
		return showNote(ctx, c, r, c.args[1])
	case verb == "add" && len(c.args) == 2:
		return addNote(ctx, c, c.args[1])
	case verb == "add":
		return usagef(`note add takes one title (quote it): snag note add "Use SQLite FTS for search" --type decision`)
	}
	return usagef(`note: snag note show N-7, or snag note add "TITLE" [--type T] [--took-from N-3 --why TEXT] (snag help note)`)
}

// showNote prints one note: its fields, its file, its body, then its
// edges both ways.
func showNote(ctx context.Context, c *call, r *remote, ref string) error {
	n, err := r.cl.Note(ctx, ref)
	if err != nil {
		return said(err)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, n)
	}
	w := c.Stdout
	fmt.Fprintf(w, "%s  %s\n", safe(n.Key), safe(n.Title))
	kv := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-9s %s\n", k+":", safe(v))
		}
	}
	kv("type", n.Type)
	kv("trust", trustOf(n.Note))
	branch := orDash(n.Branch)
	if n.Commit != "" {
		branch += " at " + shortCommit(n.Commit)
	}
	kv("branch", branch)
	kv("created", fmtTime(n.Created))
	kv("tasks", strings.Join(n.Tasks, ", "))
	kv("files", strings.Join(n.Files, ", "))
	kv("file", n.File)
	if n.Worktree != "" {
		kv("worktree", n.Worktree+": on branch "+orDash(n.Branch)+", not merged here")
	}
	if body := n.Body; strings.TrimSpace(body) != "" {
		fmt.Fprintln(w)
		io.WriteString(w, safeText(body))
		if !strings.HasSuffix(body, "\n") {
			fmt.Fprintln(w)
		}
	}
	if len(n.Links) > 0 {
		fmt.Fprintln(w, "\nlinks:")
		for _, l := range n.Links {
			fmt.Fprintln(w, "  "+outEdge(l, n.Trust))
		}
	}
	if len(n.In) > 0 {
		fmt.Fprintln(w, "\nlinked from:")
		for _, l := range n.In {
			fmt.Fprintln(w, "  "+inEdge(l))
		}
	}
	return nil
}

// outEdge is a note's edge to another as show prints it, and the graph:
// -> chose N-4 "simpler" (vetted). noteTrust is the note's, which an
// edge with no trust of its own has.
func outEdge(l api.Link, noteTrust queue.Trust) string {
	return "-> " + safe(l.Kind) + " " + safe(l.To) + edgeTail(l, noteTrust)
}

// inEdge is another note's edge to this one: <- N-5 took_from "the
// ranking" (unvetted), read "N-5 took_from this".
func inEdge(l api.Link) string {
	return "<- " + safe(l.From) + " " + safe(l.Kind) + edgeTail(l, "")
}

func edgeTail(l api.Link, noteTrust queue.Trust) string {
	s := ""
	if l.Why != "" {
		s += " " + strconv.Quote(l.Why)
	}
	if t := orTrustOf(l.Trust, noteTrust); t != "" {
		s += " (" + string(t) + ")"
	}
	return s
}

func orTrustOf(t, or queue.Trust) queue.Trust {
	if t != "" {
		return t
	}
	return or
}

// trustOf is a note's trust as people read it: vetted, or unvetted with
// the agent that wrote it.
func trustOf(n api.Note) string {
	if n.Trust == queue.TrustVetted {
		return string(n.Trust)
	}
	s := string(orTrustOf(n.Trust, queue.TrustUnvetted))
	if n.Author != "" {
		s += ", by " + n.Author
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func addNote(ctx context.Context, c *call, title string) error {
	if strings.TrimSpace(title) == "" {
		return usagef(`note add: empty title: say the decision or finding in a line`)
	}
	typ, err := noteType(c)
	if err != nil {
		return err
	}
	req := api.NoteRequest{Title: title, Type: typ, Task: c.opt.task, Files: c.opt.files,
		TookFrom: strings.TrimSpace(flagString(c, "took-from")), Why: flagString(c, "why"), By: who()}
	if req.Why != "" && req.TookFrom == "" {
		return usagef("--why says what was taken from --took-from: give both, or say why in a link (--link KIND:N-4:WHY)")
	}
	for _, s := range flagList(c, "link") {
		l, err := parseLinkFlag(s)
		if err != nil {
			return err
		}
		req.Links = append(req.Links, l)
	}
	if req.Body, err = noteBody(c); err != nil {
		return err
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	req.Worktree = r.worktree()
	d, err := r.cl.AddNote(ctx, req)
	if err != nil {
		return said(err)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, d)
	}
	where := d.File
	if d.Worktree != "" {
		where += " in " + d.Worktree
	}
	fmt.Fprintf(c.Stdout, "wrote %s (%s, %s) in %s\n", safe(d.Key), safe(d.Type), safe(string(d.Trust)), safe(where))
	for _, l := range d.Links {
		fmt.Fprintln(c.Stdout, "  "+outEdge(l, d.Trust))
	}
	return nil
}

// noteBody reads a new note's body from --body, or --body-file, or
// standard input (--body - or --body-file -).
func noteBody(c *call) (string, error) {
	file := flagString(c, "body-file")
	switch {
	case file != "" && c.opt.body != "":
		return "", usagef("note add: give the body once: --body TEXT, --body - or --body-file FILE")
	case c.opt.body == "-" || file == "-":
		b, err := io.ReadAll(io.LimitReader(c.Stdin, queue.MaxFileSize))
		if err != nil {
			return "", fmt.Errorf("note add: read the body: %w", err)
		}
		return string(b), nil
	case file != "":
		path := file
		if !filepath.IsAbs(path) {
			path = filepath.Join(c.Dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("note add: read the body: %w (--body-file names a file of markdown)", err)
		}
		if !utf8.Valid(b) {
			return "", fmt.Errorf("note add: %s is not UTF-8 text: a note's body is markdown", file)
		}
		return string(b), nil
	}
	return c.opt.body, nil
}

// parseLinkFlag reads --link KIND:N-4 or KIND:N-4:WHY.
func parseLinkFlag(s string) (api.Link, error) {
	kind, rest, _ := strings.Cut(s, ":")
	to, why, _ := strings.Cut(rest, ":")
	kind, to = strings.TrimSpace(kind), strings.TrimSpace(to)
	if to == "" {
		return api.Link{}, usagef("--link %q: want KIND:NOTE or KIND:NOTE:WHY, as --link chose:N-4:simpler", s)
	}
	k, err := linkKind(kind)
	if err != nil {
		return api.Link{}, err
	}
	return api.Link{To: to, Kind: k, Why: strings.TrimSpace(why)}, nil
}

// linkKind checks an edge's kind.
func linkKind(kind string) (string, error) {
	for _, k := range queue.LinkKinds {
		if strings.EqualFold(k, kind) {
			return k, nil
		}
	}
	return "", usagef("unknown link kind %q (want one of %s)", kind, strings.Join(queue.LinkKinds, ", "))
}

// worktree is the worktree a graph write from this project goes to: ""
// when snagd serves this folder, else this folder, another worktree of
// the repository snagd serves (its note is on this worktree's branch).
func (r *remote) worktree() string {
	if r.cl == nil || r.cl.Health().Root == r.cl.Root() {
		return ""
	}
	return r.cl.Root()
}

// noteLines are notes one to a line, their key, type and branch in
// columns: N-4  decision  main  Use SQLite FTS (unvetted, by ADA) [SNAG-10].
func noteLines(ns []api.Note) []string {
	rows := make([][]string, len(ns))
	for i, n := range ns {
		rows[i] = []string{safe(n.Key), safe(n.Type), safe(orDash(n.Branch)), noteSummary(n)}
	}
	return align(rows)
}

// align joins each row's cells with two spaces, every cell but the last
// padded to its column's width; an empty last cell adds nothing.
func align(rows [][]string) []string {
	var widths []int
	for _, r := range rows {
		for j, s := range r {
			if j == len(widths) {
				widths = append(widths, 0)
			}
			widths[j] = max(widths[j], utf8.RuneCountInString(s))
		}
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		var b strings.Builder
		for j, s := range r {
			if j > 0 {
				b.WriteString("  ")
			}
			b.WriteString(s)
			if j < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[j]-utf8.RuneCountInString(s)))
			}
		}
		out[i] = strings.TrimRight(b.String(), " ")
	}
	return out
}

// noteSummary is a note's title, with who wrote it when an agent did and
// the tasks it is about: Use SQLite FTS (unvetted, by ADA) [SNAG-10].
func noteSummary(n api.Note) string {
	s := safe(n.Title)
	if n.Trust != queue.TrustVetted {
		s += " (" + safe(trustOf(n)) + ")"
	}
	if len(n.Tasks) > 0 {
		s += " [" + safe(strings.Join(n.Tasks, ", ")) + "]"
	}
	// A search's snippet, when the match is not the title alone.
	if sn := n.Snippet; sn != "" && strings.NewReplacer("[", "", "]", "").Replace(sn) != n.Title {
		s += ": " + clip(safe(sn), 80)
	}
	return s
}
