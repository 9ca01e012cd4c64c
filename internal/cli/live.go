package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/token"
)

func init() {
	register(&command{
		name: "token", args: "rotate",
		summary: "Replace the secret in ~/.snag/token (or $SNAG_HOME/token) with a fresh one.\n\nClients holding the old token are refused from then on; a running snagd reads the token\nat start, so restart it after a rotation.",
		run:     runToken,
	})
	register(&command{
		name: "log", args: "[--follow] [--json] [--limit N]",
		summary: "Show the audit log: every change to a task, lease or session, who made it, and how it ended.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.follow, "follow", false, "keep printing new entries as they come")
			fs.BoolVar(&c.opt.json, "json", false, "print one JSON object per line")
			fs.IntVar(&c.opt.limit, "limit", 50, "how many of the latest entries to show first")
		},
		run: runLog,
	})
}

func runToken(ctx context.Context, c *call) error {
	if len(c.args) != 1 || c.args[0] != "rotate" {
		return usagef("token takes one argument: snag token rotate")
	}
	home := layout.Home()
	if _, err := token.Rotate(home); err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "rotated the token in %s/%s: restart snagd so it uses the new one (snag daemon stop; the next snag command starts it again)\n", home, token.FileName)
	return nil
}

func runLog(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("log takes no arguments, only flags: snag log --follow")
	}
	if c.opt.limit <= 0 {
		return usagef("--limit: want a number from 1")
	}
	// The audit log of live actions is the repository's, in its live
	// state: a running snagd reads it with every entry made so far; with
	// none, it is read in place (no daemon is started, no rescan made).
	r, err := running(ctx, c)
	if err != nil {
		return err
	}
	if neverLogged(r.root) && r.cl == nil && !c.opt.follow {
		fmt.Fprintln(c.Stdout, "the audit log is empty: it records every change made through snag")
		return nil
	}
	f, err := c.full()
	if err != nil {
		return err
	}
	p, err := f.Open(ctx, r.root, false)
	if err != nil {
		return err
	}
	defer p.Close()
	tail, after := auditReads(r, p)
	latest, err := tail(ctx, c.opt.limit)
	if err != nil {
		return err
	}
	if len(latest) == 0 && !c.opt.follow {
		fmt.Fprintln(c.Stdout, "the audit log is empty: it records every change made through snag")
		return nil
	}
	lp := &logPrinter{w: c.Stdout, json: c.opt.json, root: r.root,
		keyOf: p.KeyOf, ww: 3, wa: 6, wt: 4, wo: 2}
	if err := lp.print(ctx, latest); err != nil {
		return err
	}
	return followLog(ctx, c, lp, after)
}

// neverLogged reports whether no snagd has run at root: nothing was
// logged, and a read would create a snag.db.
func neverLogged(root string) bool {
	_, err := os.Stat(filepath.Join(root, layout.Folder, layout.DBFile))
	return errors.Is(err, fs.ErrNotExist)
}

// auditReads are the reads of the audit log, the latest n entries and
// the n after an id: a running snagd's when there is one, else the
// index's in place.
func auditReads(r *remote, p Index) (
	tail func(ctx context.Context, n int) ([]api.AuditEntry, error),
	after func(ctx context.Context, id int64, n int) ([]api.AuditEntry, error),
) {
	if r.cl == nil {
		return p.AuditTail, p.AuditLog
	}
	tail = func(ctx context.Context, n int) ([]api.AuditEntry, error) {
		l, err := r.cl.Audit(ctx, api.AuditQuery{Tail: n})
		return l.Entries, said(err)
	}
	after = func(ctx context.Context, id int64, n int) ([]api.AuditEntry, error) {
		l, err := r.cl.Audit(ctx, api.AuditQuery{After: id, Limit: n})
		return l.Entries, said(err)
	}
	return tail, after
}

// followLog prints the entries after the last one printed as they come,
// while --follow is on, until ctx ends or the person interrupts.
func followLog(ctx context.Context, c *call, lp *logPrinter, after func(ctx context.Context, id int64, n int) ([]api.AuditEntry, error)) error {
	ctx, cancel := c.interruptible(ctx)
	defer cancel()
	for c.opt.follow {
		flush(c.Stdout)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(300 * time.Millisecond):
		}
		es, err := after(ctx, lp.last, 1000)
		if err != nil {
			return err
		}
		if err := lp.print(ctx, es); err != nil {
			return err
		}
	}
	return nil
}

// logPrinter prints audit entries for snag log: one JSON object a line,
// or a line of columns. The columns are as wide as the first entries
// need, within bounds, so a long outcome or name is cut with an ellipsis
// instead of pushing the columns after it out of line; later entries
// (--follow) widen them rather than be cut. The detail takes what is left
// of Width.
type logPrinter struct {
	w     io.Writer
	json  bool
	root  string                                      // the project's root, which a worktree is named from
	keyOf func(ctx context.Context, id string) string // a task's key, or ""
	// ww, wa, wt and wo are the widths of the who, action, task and
	// outcome columns.
	ww, wa, wt, wo int
	last           int64 // the id of the last entry printed
}

// logCells are one audit entry's columns, safe to print.
type logCells struct{ who, action, task, outcome, detail string }

// print prints es, widening the columns to fit them first.
func (lp *logPrinter) print(ctx context.Context, es []api.AuditEntry) error {
	lp.grow(ctx, es)
	for _, e := range es {
		lp.last = e.ID
		if lp.json {
			if err := writeJSONCompact(lp.w, e); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(lp.w, lp.line(ctx, e))
	}
	return nil
}

// grow widens the columns to fit es, within bounds.
func (lp *logPrinter) grow(ctx context.Context, es []api.AuditEntry) {
	for _, e := range es {
		cs := lp.cells(ctx, e)
		lp.ww = max(lp.ww, min(utf8.RuneCountInString(cs.who), 8))
		lp.wa = max(lp.wa, min(utf8.RuneCountInString(cs.action), 14))
		lp.wt = max(lp.wt, min(utf8.RuneCountInString(cs.task), 9))
		lp.wo = max(lp.wo, min(utf8.RuneCountInString(cs.outcome), 14))
	}
}

// line is e's line: its time and columns, and as much of its detail as
// fits in Width.
func (lp *logPrinter) line(ctx context.Context, e api.AuditEntry) string {
	pad := func(s string, n int) string {
		s = clip(s, n)
		return s + strings.Repeat(" ", n-utf8.RuneCountInString(s))
	}
	cs := lp.cells(ctx, e)
	line := e.At.UTC().Format("2006-01-02 15:04:05") + "  " + pad(cs.who, lp.ww) + " " + pad(cs.action, lp.wa) + " " +
		pad(cs.task, lp.wt) + " " + pad(cs.outcome, lp.wo) + " "
	if room := Width - utf8.RuneCountInString(line); room > 1 {
		line += clip(cs.detail, room)
	}
	return strings.TrimRight(line, " ")
}

// cells are e's columns: who (the agent, or the actor), the action, the
// task by key, the outcome, and the detail, prefixed with the clone or
// the worktree it happened in.
func (lp *logPrinter) cells(ctx context.Context, e api.AuditEntry) logCells {
	who := e.Agent
	if who == "" {
		who = string(e.Actor)
	}
	task := e.TaskID
	if key := lp.keyOf(ctx, e.TaskID); key != "" {
		task = key
	}
	detail := e.Detail
	switch {
	case e.Host != "":
		detail = "[on " + e.Host + "] " + detail
	case e.Worktree != "":
		where := e.Worktree
		if rel, err := filepath.Rel(lp.root, where); err == nil {
			where = rel
		}
		detail = "[in " + where + "] " + detail
	}
	return logCells{safe(who), safe(e.Action), safe(task), safe(e.Outcome), safe(detail)}
}
