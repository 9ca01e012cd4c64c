// Command snag is the command line of snag, a file-first task queue for
// coding agents and the people who direct them. See snag help.
//
// It links the client side alone (no SQLite, no snagd, no MCP SDK, no
// browser), so a command starts in milliseconds; the few commands that
// need those parts run snagd's program, which has them (see cli.Full).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/snagdev/snag/internal/cli"
)

// main gives the command line a context that no signal ends, and the way
// to one that SIGINT and SIGTERM end, which a command asks for only before
// it waits: a command answered at once starts no signal handling.
func main() {
	code := cli.Main(context.Background(), os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Interrupt: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		}})
	os.Exit(code)
}
