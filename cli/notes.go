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
		name: "notes", args: "[--kind decision|observation|action] [--json] | show N-7",
		summary: "List the notes (.snag/notes): decisions, observations and actions, newest first; show one.\n\n" +
			"Agents write notes with snag_note (unvetted, with their name); people write them by hand as\n" +
			"markdown files with a key: N-7 line. Both are committed with the project and found by snag search.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print GET /notes (or the note) as JSON")
			fs.StringVar(&c.opt.kind, "kind", "", "only this kind: decision, observation or action")
			fs.IntVar(&c.opt.limit, "limit", 20, "at most this many")
		},
		daemon: true,
		run:    runNotes,
	})
}

func runNotes(ctx context.Context, c *call) error {
	show := len(c.args) > 0 && c.args[0] == "show"
	switch {
	case show && len(c.args) != 2:
		return usagef("notes show takes one note: snag notes show N-7")
	case !show && len(c.args) > 0:
		return usagef("notes: unknown argument %q (want snag notes, or snag notes show N-7)", c.args[0])
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	if show {
		n, err := r.cl.Note(ctx, c.args[1])
		if err != nil {
			return said(err)
		}
		if c.opt.json {
			return writeJSON(c.Stdout, n)
		}
		fmt.Fprintln(c.Stdout, noteSummary(n.Note))
		fmt.Fprintf(c.Stdout, "%s\n\n%s", n.File, n.Body)
		return nil
	}
	got, err := r.cl.Notes(ctx, api.NoteQuery{Type: c.opt.kind, Limit: c.opt.limit})
	if err != nil {
		return said(err)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, got)
	}
	if len(got.Notes) == 0 {
		fmt.Fprintln(c.Stdout, "no notes yet: agents write them with snag_note; people as files in .snag/notes/")
	}
	for _, n := range got.Notes {
		fmt.Fprintln(c.Stdout, noteSummary(n))
	}
	return nil
}

// noteSummary is one note on one line.
func noteSummary(n api.Note) string {
	s := fmt.Sprintf("%-5s %-11s %s", n.Key, n.Type, n.Title)
	if n.Trust != "vetted" {
		s += " (unvetted"
		if n.Author != "" {
			s += ", by " + n.Author
		}
		s += ")"
	}
	if len(n.Tasks) > 0 {
		s += " [" + strings.Join(n.Tasks, ", ") + "]"
	}
	return s
}
