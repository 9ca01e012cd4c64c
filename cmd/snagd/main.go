// Command snagd is snag's per-worktree daemon: it watches the task files,
// keeps the index live, owns every write and holds agents' leases. See
// snagd --help.
//
// It is also the full snag command line: "snagd snag ARGS" runs snag ARGS
// with the parts the snag program leaves out to start fast (snagd itself,
// the MCP bridge, the index opened in place). snag runs it that way for
// snag mcp, doctor, log, reindex without a daemon and reads from the files.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/snagdev/snag/internal/cli"
	"github.com/snagdev/snag/internal/cli/full"
	"github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if len(os.Args) > 1 && os.Args[1] == cli.SnagdArg {
		code := cli.Main(ctx, os.Args[2:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Full: full.New()})
		stop()
		os.Exit(code)
	}
	err := daemon.Command(ctx, os.Args[1:], version.String(), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "snagd: ") { // said once
			msg = "snagd: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}
