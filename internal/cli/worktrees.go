package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/snagdev/snag/api"
)

func init() {
	register(&command{
		name: "worktrees", args: "[--json] | prune",
		summary: "List the tasks' git worktrees: each with its branch, its task's status, and whether it is merged.\n\n" +
			"A claim makes one with snag_claim's worktree, or claim.worktree in config.json, on a branch\n" +
			"snag/<key>; the list says whether each is merged and clean.\n\n" +
			"snag worktrees prune removes those of resolved and cancelled tasks that are clean and merged,\n" +
			"with their branches, and says why it keeps the others.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print GET /worktrees (or the prune's answer) as JSON")
		},
		daemon: true,
		run:    runWorktrees,
	})
}

func runWorktrees(ctx context.Context, c *call) error {
	prune := len(c.args) == 1 && c.args[0] == "prune"
	if len(c.args) > 0 && !prune {
		return usagef("worktrees: snag worktrees, or snag worktrees prune")
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	if prune {
		got, err := r.cl.PruneWorktrees(ctx, api.MoveRequest{By: who()})
		if err != nil {
			return said(err)
		}
		if c.opt.json {
			return writeJSON(c.Stdout, got)
		}
		for _, w := range got.Removed {
			fmt.Fprintf(c.Stdout, "removed %s (%s %s) and its branch %s\n", w.Path, w.Key, w.Status, w.Branch)
		}
		for i, w := range got.Kept {
			fmt.Fprintf(c.Stdout, "kept %s: %s\n", w.Path, got.Why[i])
		}
		if len(got.Removed)+len(got.Kept) == 0 {
			fmt.Fprintln(c.Stdout, "no task worktrees")
		}
		return nil
	}
	got, err := r.cl.Worktrees(ctx)
	if err != nil {
		return said(err)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, got)
	}
	if len(got.Worktrees) == 0 {
		fmt.Fprintln(c.Stdout, "no task worktrees: snag_claim {\"worktree\": true} makes one per task")
	}
	for _, w := range got.Worktrees {
		merged, clean := "not merged", "changes"
		if w.Merged {
			merged = "merged"
		}
		if w.Clean {
			clean = "clean"
		}
		status := string(w.Status)
		if status == "" {
			status = "no such task"
		}
		fmt.Fprintf(c.Stdout, "%-8s %-12s %s, %s  %s (%s)\n", w.Key, status, merged, clean, w.Path, w.Branch)
	}
	return nil
}
