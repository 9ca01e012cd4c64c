package daemon_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	snagd "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/snagdtest"
)

// The in-process harness: snagd's Run inside the test process, on a real
// folder with real fsnotify and real HTTP on 127.0.0.1, behind the same
// helpers as a snagd process (url, get, do, task, sse, terminate). A test
// chooses by what it needs. A process is for what only a process has: a
// SIGKILL or SIGSTOP of snagd, failpoints (a -tags failpoints build),
// several snagd competing for one repository's lock, a restart that must
// be a new pid, its memory (RSS), the CLI as a person runs it. The rest
// runs in process, where it starts in milliseconds instead of a race-built
// binary's second or two, and where its progress is read directly.
//
// Each in-process daemon is independent of the others in the process: it
// gets its home, port, log, rescan interval and coordination store as
// Options, never through the environment (Run reads $SNAG_HOME, $SNAG_COORD
// and $SNAG_RESCAN only when an option is unset, and these tests set
// none). Run installs no signal handler and writes to no package-level
// variable, so tests stay t.Parallel.

// startInProcess runs snagd's Run on root inside the test process, with
// home ("" for a fresh one), on a free port of 127.0.0.1, and waits until it
// is ready. opts sets the rest (Settle, Watch, ExitIdle, ...); Root, Home,
// Port, Log and Ready are the harness's, and so is Coord when the test runs
// in team mode (inTeamMode). The test's end stops it.
func startInProcess(t *testing.T, root, home string, opts snagd.Options) *daemon {
	t.Helper()
	d := spawnInProcess(t, root, home, opts)
	d.waitReady()
	return d
}

// spawnInProcess is startInProcess without the wait: it returns once Run
// has started.
func spawnInProcess(t *testing.T, root, home string, opts snagd.Options) *daemon {
	t.Helper()
	return spawnInProcessOn(t, root, home, freePort(t), opts)
}

// spawnInProcessOn is spawnInProcess on port: 0 lets Run choose as snagd
// does with no --port (the first free port of its range, else any free
// one). The port it took is d.port once d is ready.
func spawnInProcessOn(t *testing.T, root, home string, port int, opts snagd.Options) *daemon {
	t.Helper()
	dsn := teamDSN(t)
	if dsn != "" && opts.Coord == "" {
		opts.Coord = dsn
	}
	if home == "" {
		home = filepath.Join(t.TempDir(), "home")
	}
	log := &snagdtest.Buffer{}
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	opts.Root, opts.Home, opts.Port = root, home, port
	opts.Log = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := &daemon{t: t, root: root, home: home, port: port, log: log, done: make(chan struct{}), cancel: cancel, ready: ready, team: dsn != ""}
	// Ready is called once, before ready closes: d.addr is read after.
	opts.Ready = func(addr string) { d.addr = addr; close(ready) }
	go func() {
		err := snagd.Run(ctx, opts)
		if err != nil {
			log.Write([]byte("run: " + err.Error() + "\n"))
		}
		d.err = err
		close(d.done)
	}()
	t.Cleanup(func() {
		d.stopInProcess()
		if t.Failed() {
			t.Logf("snagd (in process) log:\n%s", log.String())
		}
	})
	if dsn != "" {
		// Before the daemon is stopped (cleanups run last first).
		t.Cleanup(func() { d.agreesWithStore(dsn) })
	}
	return d
}

// waitInProcess waits until the in-process daemon says it is ready (its
// Ready option), then reads its port from the address it serves and its
// token from its home.
func (d *daemon) waitInProcess(within time.Duration) {
	d.t.Helper()
	select {
	case <-d.ready:
	case <-d.done:
		d.t.Fatalf("snagd (in process) ended: %v\n%s", d.err, d.log.String())
	case <-time.After(within):
		d.t.Fatalf("snagd (in process) not ready in %s\n%s", within, d.log.String())
	}
	_, port, err := net.SplitHostPort(d.addr)
	if err == nil {
		d.port, err = strconv.Atoi(port)
	}
	if err != nil {
		d.t.Fatalf("snagd (in process) serves at %q: %v", d.addr, err)
	}
	tok, err := os.ReadFile(filepath.Join(d.home, "token"))
	if err != nil {
		d.t.Fatal(err)
	}
	d.token = strings.TrimSpace(string(tok))
}

// stopInProcess ends the in-process daemon's Run, as SIGTERM ends a
// process's, and waits for it to return.
func (d *daemon) stopInProcess() {
	d.cancel()
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.t.Errorf("snagd (in process) did not stop in 30 s\n%s", d.log.String())
	}
}
