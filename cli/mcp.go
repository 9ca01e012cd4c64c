package cli

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/mcp"
	mcpremote "github.com/snagdev/snag/mcp/remote"
	"github.com/snagdev/snag/project"
	"github.com/snagdev/snag/version"
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
	root, err := project.Find(c.Dir)
	if err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		// The bridge's live heap is a few MB: the default collects every
		// few calls (docs/decisions.md, MCP bridge).
		debug.SetGCPercent(400)
	}
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))
	opts := client.Options{Home: project.Home(), Waiting: func(h client.Health) {
		log.Info("waiting for snagd to finish reading the task files", "pid", h.PID, "root", h.Root)
	}}
	if !c.opt.noAutostart && !envSet(NoAutostartEnv) {
		opts.Start = startDaemon
	}
	mo := mcp.Options{Root: root, Version: version.String(), Log: log, In: c.Stdin, Out: c.Stdout,
		Redial: func(ctx context.Context) (mcp.Live, error) {
			cl, err := client.Dial(ctx, root, client.Options{Home: project.Home()})
			if err != nil {
				return nil, dialErr(err)
			}
			b := mcpremote.NewDaemon(cl, log)
			b.SetRoot(root)
			return b, nil
		}}
	if cl, err := client.Dial(ctx, root, opts); err != nil {
		log.Warn("no snagd: reads come from the files; writes fail until one runs", "err", err)
		mo.DialErr = dialErr(err)
	} else {
		b := mcpremote.NewDaemon(cl, log)
		b.SetRoot(root)
		mo.Daemon = b
	}
	return mcp.Run(ctx, mo)
}

// dialErr marks a discovery error whose cause is a snagd that proves
// another token, for the MCP server to name that cause.
func dialErr(err error) error {
	if errors.Is(err, client.ErrTokenMismatch) {
		return mcp.WrongToken(err)
	}
	return err
}
