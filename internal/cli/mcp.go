package cli

import (
	"context"
	"flag"
	"slices"
	"strings"

	"github.com/snagdev/snag/internal/layout"
)

func init() {
	register(&command{
		name: "mcp", args: "[--toolsets queue,team] [--no-autostart]",
		summary: "Serve the queue to an agent over MCP on stdin and stdout (register it with: claude mcp add snag -- snag mcp).\n\n" +
			"It finds the project from the working directory and talks to its snagd, starting one when none answers.\n" +
			"Without a daemon, reads come from the files (labelled source \"files\") and writes fail naming the fix.\n" +
			"Stdout carries protocol frames only; logs go to stderr.",
		daemon: true,
		flags: func(fs *flag.FlagSet, c *call) {
			fs.String("toolsets", "queue", "comma-separated toolsets to serve: queue (one agent working the queue), team (coordination: context, file claims, reports, handoffs)")
		},
		run: runMCP,
	})
}

func runMCP(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("mcp takes no arguments, only flags: snag mcp --toolsets queue")
	}
	toolsets, err := parseToolsets(c.fs.Lookup("toolsets").Value.String())
	if err != nil {
		return err
	}
	root, err := layout.Find(c.Dir)
	if err != nil {
		return err
	}
	f, err := c.full()
	if err != nil {
		return err
	}
	o := MCPOptions{Root: root, In: c.Stdin, Out: c.unbuffered(), Stderr: c.Stderr, Toolsets: toolsets}
	if !c.opt.noAutostart && !envSet(NoAutostartEnv) {
		o.Start = startDaemon
	}
	return f.MCP(ctx, o)
}

// toolsets are the MCP toolsets snag mcp serves.
var toolsets = []string{"queue", "team", "graph"}

// parseToolsets reads --toolsets: known names, comma-separated.
func parseToolsets(v string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "":
		case !slices.Contains(toolsets, t):
			return nil, usagef("--toolsets: unknown toolset %q: use %s (comma-separated)", t, strings.Join(toolsets, ", "))
		case !slices.Contains(out, t):
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		out = []string{"queue"}
	}
	return out, nil
}
