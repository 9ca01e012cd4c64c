package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

func init() {
	register(&command{
		name: "reindex", args: "[--json]",
		summary: "Rebuild the index from the task files. Live state (leases, sessions, the audit log) is kept.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print JSON")
		},
		run: runReindex,
	})
	register(&command{
		name: "doctor", args: "[--fix] [--json]",
		summary: "Check the project for broken task files, duplicates, bad depends_on and leftover temp files.\n\nIt reports files that do not parse, git conflict markers, ids or aliases in two files,\ndepends_on entries that point nowhere or loop, and temp files left by a crash.\nIt exits 1 when it finds any.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.fix, "fix", false, "give files without an id or key fresh ones, and remove old temp files")
			fs.BoolVar(&c.opt.json, "json", false, "print JSON")
		},
		run: runDoctor,
	})
	for _, m := range []struct {
		action  queue.Action
		summary string
	}{
		{queue.ActPromote, "Promote inbox tasks into the queue: a person has read them; they become vetted and open."},
		{queue.ActReject, "Reject inbox tasks: they become cancelled."},
		{queue.ActCancel, "Cancel tasks: they will not be done."},
		{queue.ActReopen, "Reopen resolved, cancelled or needs_review tasks: back to open."},
		{queue.ActRelease, "Take tasks back from the agents that hold them: their leases end and the tasks are open again.\n\nThe agent's later writes to a released task are refused as stale."},
	} {
		register(&command{
			name: string(m.action), args: "ID... [--reason TEXT] [--json]", daemon: true,
			summary: m.summary,
			flags: func(fs *flag.FlagSet, c *call) {
				fs.StringVar(&c.opt.reason, "reason", "", "why, for the audit log")
				fs.BoolVar(&c.opt.json, "json", false, "print the tasks moved as JSON")
			},
			run: func(ctx context.Context, c *call) error {
				return runMove(ctx, c, m.action)
			},
		})
	}
}

func runReindex(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("reindex takes no arguments")
	}
	var st struct {
		Files  int   `json:"files"`
		Failed int   `json:"failed"`
		MS     int64 `json:"ms"`
	}
	// A running snagd rebuilds its own index; without one, snag does.
	if r, err := running(ctx, c); err != nil {
		return err
	} else if r.cl != nil {
		stop := c.saying("snagd is rebuilding the index from the task files")
		ri, err := r.cl.Reindex(ctx, api.MoveRequest{By: who()})
		stop()
		if err != nil {
			return said(err)
		}
		st.Files, st.Failed, st.MS = ri.Files, ri.Failed, ri.MS
	} else {
		f, err := c.full()
		if err != nil {
			return err
		}
		p, err := f.Open(ctx, r.root, false)
		if err != nil {
			return err
		}
		defer p.Close()
		stop := c.saying("rebuilding the index from the task files")
		ri, err := p.Rebuild(ctx)
		stop()
		if err != nil {
			return err
		}
		st.Files, st.Failed, st.MS = ri.Files, ri.Failed, ri.MS
	}
	if c.opt.json {
		return writeJSON(c.Stdout, st)
	}
	fmt.Fprintf(c.Stdout, "indexed %d files (%d failed) in %s\n", st.Files, st.Failed, (time.Duration(st.MS) * time.Millisecond).String())
	if st.Failed > 0 {
		fmt.Fprintln(c.Stdout, "snag doctor says what is wrong with the ones that failed")
	}
	return nil
}

func runDoctor(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("doctor takes no arguments")
	}
	// The checks read the index in place.
	defer c.saying("reading and checking every task file")()
	f, err := c.full()
	if err != nil {
		return err
	}
	r, err := running(ctx, c)
	if err != nil {
		return err
	}
	p, err := f.Open(ctx, r.root, false)
	if err != nil {
		return err
	}
	defer p.Close()
	// A running snagd is the index's one writer: it rescans, so the index
	// has seen the latest edits; without one, snag brings it up to date.
	if r.cl != nil {
		if _, err := r.cl.Rescan(ctx); err != nil {
			return said(err)
		}
	} else if err := p.Sync(ctx); err != nil {
		return err
	}
	if c.opt.fix {
		done, err := p.Fix(ctx)
		for _, d := range done {
			fmt.Fprintln(c.Stdout, "fixed: "+safe(d))
		}
		if err != nil {
			return err
		}
	}
	found, err := p.Doctor(ctx)
	if err != nil {
		return err
	}
	if c.opt.json {
		if found == nil {
			found = []Finding{}
		}
		if err := writeJSON(c.Stdout, map[string]any{"findings": found}); err != nil {
			return err
		}
	} else {
		for _, f := range found {
			fmt.Fprintf(c.Stdout, "%-9s %s: %s\n", f.Kind, safe(p.Rel(f.Path)), safe(f.Message))
		}
		if len(found) == 0 {
			fmt.Fprintln(c.Stdout, "no problems found")
		} else if fixable(found) && !c.opt.fix {
			fmt.Fprintln(c.Stdout, "snag doctor --fix can fix some of these")
		}
	}
	if len(found) > 0 {
		return errFound
	}
	return nil
}

func fixable(fs []Finding) bool {
	for _, f := range fs {
		if f.Fixable {
			return true
		}
	}
	return false
}

func runMove(ctx context.Context, c *call, action queue.Action) error {
	return runMoveAs(ctx, c, action, string(action))
}
