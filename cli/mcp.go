package cli

import (
	"context"
	"flag"

	"github.com/snagdev/snag/layout"
)

func init() {
	register(&command{
		name: "mcp", args: "[--toolsets queue] [--no-autostart]",
		summary: "Serve the queue to an agent over MCP on stdin and stdout (register it with: claude mcp add snag -- snag mcp).\n\n" +
			"It finds the project from the working directory and talks to its snagd, starting one when none answers.\n" +
			"Without a daemon, reads come from the files (labelled source \"files\") and writes fail naming the fix.\n" +
			"Stdout carries protocol frames only; logs go to stderr.",
		daemon: true,
		flags: func(fs *flag.FlagSet, c *call) {
			fs.String("toolsets", "queue", "comma-separated toolsets to serve; only queue exists")
		},
		run: runMCP,
	})
}

func runMCP(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("mcp takes no arguments, only flags: snag mcp --toolsets queue")
	}
	if ts := c.fs.Lookup("toolsets").Value.String(); ts != "queue" && ts != "" {
		return usagef("--toolsets: unknown toolset %q: only queue exists", ts)
	}
	root, err := layout.Find(c.Dir)
	if err != nil {
		return err
	}
	f, err := c.full()
	if err != nil {
		return err
	}
	o := MCPOptions{Root: root, In: c.Stdin, Out: c.unbuffered(), Stderr: c.Stderr}
	if !c.opt.noAutostart && !envSet(NoAutostartEnv) {
		o.Start = startDaemon
	}
	return f.MCP(ctx, o)
}
