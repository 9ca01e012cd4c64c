package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	root := r.root
	if _, err := os.Stat(filepath.Join(root, layout.Folder, layout.DBFile)); errors.Is(err, fs.ErrNotExist) && r.cl == nil && !c.opt.follow {
		// No snagd has run here: nothing was logged, and a read creates
		// no snag.db.
		fmt.Fprintln(c.Stdout, "the audit log is empty: it records every change made through snag")
		return nil
	}
	f, err := c.full()
	if err != nil {
		return err
	}
	p, err := f.Open(ctx, root, false)
	if err != nil {
		return err
	}
	defer p.Close()
	tail, after := p.AuditTail, p.AuditLog
	if r.cl != nil {
		tail = func(ctx context.Context, n int) ([]api.AuditEntry, error) {
			l, err := r.cl.Audit(ctx, api.AuditQuery{Tail: n})
			return l.Entries, said(err)
		}
		after = func(ctx context.Context, id int64, n int) ([]api.AuditEntry, error) {
			l, err := r.cl.Audit(ctx, api.AuditQuery{After: id, Limit: n})
			return l.Entries, said(err)
		}
	}
	latest, err := tail(ctx, c.opt.limit)
	if err != nil {
		return err
	}
	var last int64
	// The columns are as wide as the first entries need, within bounds, so
	// a long outcome or name is cut with an ellipsis instead of pushing the
	// columns after it out of line; the detail takes what is left of Width.
	type cells struct{ who, action, task, outcome, detail string }
	cellsOf := func(e api.AuditEntry) cells {
		who := e.Agent
		if who == "" {
			who = string(e.Actor)
		}
		task := e.TaskID
		if key := p.KeyOf(ctx, e.TaskID); key != "" {
			task = key
		}
		detail := e.Detail
		switch {
		case e.Host != "":
			detail = "[on " + e.Host + "] " + detail
		case e.Worktree != "":
			where := e.Worktree
			if rel, err := filepath.Rel(root, where); err == nil {
				where = rel
			}
			detail = "[in " + where + "] " + detail
		}
		return cells{safe(who), safe(e.Action), safe(task), safe(e.Outcome), safe(detail)}
	}
	ww, wa, wt, wo := 3, 6, 4, 2
	// grow widens the columns to fit es, within bounds: the first entries
	// set them, and later ones (--follow) widen them rather than be cut.
	grow := func(es []api.AuditEntry) {
		for _, e := range es {
			cs := cellsOf(e)
			ww = max(ww, min(utf8.RuneCountInString(cs.who), 8))
			wa = max(wa, min(utf8.RuneCountInString(cs.action), 14))
			wt = max(wt, min(utf8.RuneCountInString(cs.task), 9))
			wo = max(wo, min(utf8.RuneCountInString(cs.outcome), 14))
		}
	}
	grow(latest)
	pad := func(s string, n int) string {
		s = clip(s, n)
		return s + strings.Repeat(" ", n-utf8.RuneCountInString(s))
	}
	print := func(es []api.AuditEntry) error {
		grow(es)
		for _, e := range es {
			last = e.ID
			if c.opt.json {
				if err := writeJSONLine(c, e); err != nil {
					return err
				}
				continue
			}
			cs := cellsOf(e)
			line := e.At.UTC().Format("2006-01-02 15:04:05") + "  " + pad(cs.who, ww) + " " + pad(cs.action, wa) + " " +
				pad(cs.task, wt) + " " + pad(cs.outcome, wo) + " "
			if room := Width - utf8.RuneCountInString(line); room > 1 {
				line += clip(cs.detail, room)
			}
			fmt.Fprintln(c.Stdout, strings.TrimRight(line, " "))
		}
		return nil
	}
	if len(latest) == 0 && !c.opt.follow {
		fmt.Fprintln(c.Stdout, "the audit log is empty: it records every change made through snag")
		return nil
	}
	if err := print(latest); err != nil {
		return err
	}
	ctx, cancel := c.interruptible(ctx)
	defer cancel()
	for c.opt.follow {
		flush(c.Stdout)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(300 * time.Millisecond):
		}
		es, err := after(ctx, last, 1000)
		if err != nil {
			return err
		}
		if err := print(es); err != nil {
			return err
		}
	}
	return nil
}

func writeJSONLine(c *call, v any) error {
	return writeJSONCompact(c.Stdout, v)
}
