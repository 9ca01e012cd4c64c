package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/snagdev/snag/internal/version"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func init() {
	register(&command{
		name: "daemon", args: "[--root DIR] [--port N] [--log LEVEL] | status | stop",
		summary: "Run snagd, the project's daemon, in the foreground (the same as the snagd command).\n\n" +
			"One snagd serves every git worktree of a repository. snag daemon status says whether\n" +
			"one serves this project (pid, port, root, counts, the worktrees open); snag daemon stop\n" +
			"stops it, for every worktree, and waits until it has gone. Other commands start one in\n" +
			"the background when none answers, logging to .snag/snagd.log.",
		run: runDaemon,
		raw: true,
	})
}

func runDaemon(ctx context.Context, c *call) error {
	if len(c.rawArgs) == 0 || c.rawArgs[0] == "" || c.rawArgs[0][0] == '-' {
		if c.Full != nil {
			return c.Full.Daemon(ctx, c.rawArgs, c.unbuffered(), c.Stderr)
		}
		// snag daemon is snagd: run it in place of this process.
		exe, err := snagd()
		if err != nil {
			return fmt.Errorf("snag daemon runs snagd, which %w", err)
		}
		return c.exec(exe, append([]string{filepath.Base(exe)}, c.rawArgs...), nil)
	}
	if len(c.rawArgs) > 1 {
		return usagef("daemon %s takes no arguments", c.rawArgs[0])
	}
	switch c.rawArgs[0] {
	case "status":
		return daemonStatus(ctx, c)
	case "stop":
		return daemonStop(ctx, c)
	}
	return usagef("daemon: unknown subcommand %q (want status or stop, or flags to run snagd: snag daemon --root DIR)", c.rawArgs[0])
}

func daemonStatus(ctx context.Context, c *call) error {
	r, err := running(ctx, c)
	if err != nil {
		return err
	}
	if r.cl == nil {
		fmt.Fprintf(c.Stdout, "no snagd serves %s: snag daemon starts one (other commands start one in the background)\n", r.root)
		return errFound
	}
	h, err := r.cl.Fresh(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "snagd %s serves %s\n", h.Version, h.Root)
	if mine := version.String(); h.Version != mine {
		fmt.Fprintf(c.Stdout, "this snag is %s: the next command that starts snagd replaces an older one (snag daemon stop does it now)\n", mine)
	}
	fmt.Fprintf(c.Stdout, "pid %d, 127.0.0.1:%d, %d tasks, %d with problems\n", h.PID, h.Port, h.Counts.Tasks, h.Counts.Problems)
	if !h.Ready {
		fmt.Fprintln(c.Stdout, "still reading the task files")
	}
	if h.Polling {
		fmt.Fprintln(c.Stdout, "polling: the system gave no file watches (raise fs.inotify.max_user_watches)")
	}
	if h.Root != r.root {
		fmt.Fprintf(c.Stdout, "this worktree (%s) is a task's: the main worktree's view serves it\n", r.root)
	}
	if len(h.Worktrees) > 1 {
		fmt.Fprintf(c.Stdout, "it serves every worktree of the repository; open now: %s\n", strings.Join(h.Worktrees, ", "))
	}
	return nil
}

func daemonStop(ctx context.Context, c *call) error {
	r, err := running(ctx, c)
	if err != nil {
		return err
	}
	if r.cl == nil {
		fmt.Fprintf(c.Stdout, "no snagd serves %s\n", r.root)
		return nil
	}
	h := r.cl.Health()
	// One snagd serves every worktree of the repository: stopping it stops
	// it for all of them (their agents' leases survive in the files).
	if err := syscall.Kill(h.PID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop snagd (pid %d): %w", h.PID, err)
	}
	ctx, cancel := c.interruptible(ctx)
	defer cancel()
	defer c.saying(fmt.Sprintf("waiting for snagd (pid %d) to finish its writes and stop", h.PID))()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if gone(h.PID) {
			fmt.Fprintf(c.Stdout, "stopped snagd (pid %d)\n", h.PID)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("snagd (pid %d) is still running 15 s after SIGTERM: kill -9 %d ends it (leases survive in the task files)", h.PID, h.PID)
}

// gone reports whether the process has exited: no such process, or a
// zombie its parent has not reaped yet.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}
