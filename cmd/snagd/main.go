// Command snagd is snag's per-worktree daemon: it watches the task files,
// keeps the index live, owns every write and holds agents' leases. See
// snagd --help.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/snagdev/snag/daemon"
	"github.com/snagdev/snag/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := daemon.Command(ctx, os.Args[1:], version.String(), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "snagd: "+err.Error())
		os.Exit(1)
	}
}
