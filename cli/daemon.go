package cli

import (
	"context"

	"github.com/snagdev/snag/daemon"
)

func init() {
	register(&command{
		name: "daemon", args: "[--root DIR] [--port N] [--log LEVEL]",
		summary: "Run snagd, the project's daemon, in the foreground (the same as the snagd command).",
		run: func(ctx context.Context, c *call) error {
			return daemon.Command(ctx, c.rawArgs, Version, c.Stdout, c.Stderr)
		},
		raw: true,
	})
}
