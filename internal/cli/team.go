package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
)

func init() {
	register(&command{
		name: "files", args: "[--json] | --release PATH --reason TEXT",
		summary: "List the live file claims: which agent holds which paths, folders and globs, and for how long.\n\n" +
			"Agents claim files with snag_files before they edit them; an exclusive claim keeps other agents'\n" +
			"claims (and their commits, with snag install git-hook) off those paths until it ends.\n" +
			"snag files --release PATH frees a claim from whoever holds it, with a reason for the audit log.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.json, "json", false, "print GET /files as JSON")
			fs.StringVar(&c.opt.release, "release", "", "free the claim of this path, folder or glob (as listed)")
			fs.StringVar(&c.opt.reason, "reason", "", "why, for the audit log (required with --release)")
		},
		run: runFiles,
	})
	register(&command{
		name: "handoff", args: "AGENT TITLE [--body TEXT] [--task REF]",
		summary: "Leave work for an agent by name: it appears in the agent's next snag_context until seen.\n\n" +
			"With --task, the task's lease moves to that agent at once (a new epoch: the old holder's later\n" +
			"writes are refused), when the agent is connected; otherwise nothing moves and snag says why.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.StringVar(&c.opt.body, "body", "", "what the agent should know")
			fs.StringVar(&c.opt.task, "task", "", "a claimed task whose lease moves to the agent")
		},
		daemon: true,
		run:    runHandoff,
	})
	register(&command{
		name: "guard", args: "[--agent NAME] [PATH...]",
		summary: "Refuse a commit that touches a path another live agent claims exclusively (snag_files).\n\n" +
			"With no paths it checks what is staged (git diff --cached). The committing agent's own claims pass:\n" +
			"its name comes from --agent or SNAG_AGENT. snag install git-hook runs it as a pre-commit hook;\n" +
			"git commit --no-verify skips it. With no snagd running no agent is live, and the commit passes.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.StringVar(&c.opt.agent, "agent", "", "the committing agent's name (default $SNAG_AGENT)")
		},
		run: runGuard,
	})
}

// filesJSON is the stable shape of snag files --json: GET /files.
type filesJSON = api.FileClaims

func runFiles(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("files takes no arguments: snag files, or snag files --release PATH --reason TEXT")
	}
	r, err := running(ctx, c)
	if err != nil {
		return err
	}
	if r.cl == nil {
		if c.opt.release != "" {
			return fmt.Errorf("no snagd serves %s, so no file is claimed", r.root)
		}
		fmt.Fprintf(c.Stdout, "no snagd serves %s, so no file is claimed\n", r.root)
		return nil
	}
	if c.opt.release != "" {
		if strings.TrimSpace(c.opt.reason) == "" {
			return usagef("files --release needs --reason: the agent reads why in the audit log")
		}
		got, err := r.cl.ForceReleaseFile(ctx, api.ForceReleaseRequest{Path: c.opt.release, By: who(), Reason: c.opt.reason})
		if err != nil {
			return said(err)
		}
		for _, f := range got.Released {
			fmt.Fprintf(c.Stdout, "released %s from %s\n", f.Path, f.Holder)
		}
		return nil
	}
	got, err := r.cl.Files(ctx)
	if err != nil {
		return said(err)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, filesJSON(got))
	}
	if len(got.Claims) == 0 {
		fmt.Fprintln(c.Stdout, "no file is claimed: agents claim files with snag_files before they edit them")
		return nil
	}
	printClaims(c.Stdout, got.Claims, "")
	return nil
}

// printClaims writes one line per claim: holder (with no indent), path,
// mode and time left.
func printClaims(w io.Writer, cs []api.FileClaim, indent string) {
	now := time.Now()
	for _, f := range cs {
		mode := "exclusive"
		if !f.Exclusive {
			mode = "shared"
		}
		left := max(0, int(f.Expires.Sub(now).Seconds()))
		if indent == "" {
			fmt.Fprintf(w, "%-8s %s (%s, %d s left)\n", f.Holder, f.Path, mode, left)
		} else { // under the holder's own line
			fmt.Fprintf(w, "%s%s (%s, %d s left)\n", indent, f.Path, mode, left)
		}
	}
}

func runHandoff(ctx context.Context, c *call) error {
	if len(c.args) != 2 {
		return usagef("handoff takes an agent and a title: snag handoff ORCA \"Review the cart fix\" [--task SNAG-3]")
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	got, err := r.cl.Handoff(ctx, api.HandoffRequest{To: c.args[0], Title: c.args[1], Body: c.opt.body, Task: c.opt.task, By: who()})
	if err != nil {
		return said(err)
	}
	to := strings.ToUpper(c.args[0])
	switch {
	case got.Moved:
		fmt.Fprintf(c.Stdout, "%s is %s's now (epoch %d); the note shows in their next snag_context\n", got.Key, to, got.Epoch)
	case got.Live && got.Host != "":
		fmt.Fprintf(c.Stdout, "left for %s, connected on %s: it shows in their next snag_context there\n", to, got.Host)
	case got.Live:
		fmt.Fprintf(c.Stdout, "left for %s: it shows in their next snag_context\n", to)
	default:
		fmt.Fprintf(c.Stdout, "left for %s, who is not connected: it shows when an agent connects under that name\n", to)
	}
	return nil
}

func runGuard(ctx context.Context, c *call) error {
	paths := c.args
	if len(paths) == 0 {
		// --no-renames: a renamed file is its old path and its new one,
		// and a claim of either counts.
		out, err := c.git(ctx, "diff", "--cached", "--name-only", "--no-renames", "-z")
		if err != nil {
			return fmt.Errorf("guard: list the staged paths: %w (run it inside a git repository, or name the paths)", err)
		}
		for _, p := range strings.Split(out, "\x00") {
			if p != "" {
				paths = append(paths, p)
			}
		}
	}
	if len(paths) == 0 {
		return nil
	}
	r, err := running(ctx, c)
	if err != nil {
		return err
	}
	if r.cl == nil {
		return nil // no snagd: no agent is live, nothing is claimed
	}
	agent := c.opt.agent
	if agent == "" {
		agent = os.Getenv("SNAG_AGENT")
	}
	got, err := r.cl.Guard(ctx, api.GuardRequest{Committer: strings.ToUpper(agent), Paths: paths})
	if err != nil {
		return said(err)
	}
	if len(got.Blocked) == 0 {
		return nil
	}
	holders := map[string][]string{}
	for _, b := range got.Blocked {
		for _, f := range b.Claims {
			holders[f.Holder] = append(holders[f.Holder], fmt.Sprintf("%s (claim %s, %d s left)", b.Path, f.Path,
				max(0, int(time.Until(f.Expires).Seconds()))))
		}
	}
	names := make([]string, 0, len(holders))
	for h := range holders {
		names = append(names, h)
	}
	sort.Strings(names)
	fmt.Fprintln(c.Stderr, "snag guard: this commit touches files another agent has claimed:")
	for _, h := range names {
		fmt.Fprintf(c.Stderr, "  %s holds %s\n", h, strings.Join(holders[h], ", "))
	}
	fmt.Fprintln(c.Stderr, "Leave those paths out (git restore --staged PATH), wait for the claim to end, or ask the holder "+
		"(snag handoff). git commit --no-verify commits anyway.")
	return &exitError{code: 1}
}

// git runs git in the command's folder and returns its output.
func (c *call) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = c.Dir
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return string(out), err
}
