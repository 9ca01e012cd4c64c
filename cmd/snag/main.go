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

	"github.com/snagdev/snag/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
