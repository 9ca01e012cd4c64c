package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/internal/pgtest"
	"github.com/snagdev/snag/internal/snagdtest"
)

// snagdBin is the snagd binary the tests run as a real process. It is built
// with the failpoints tag, which the crash tests arm through FailpointEnv;
// unarmed, it is the snagd make build makes.
var snagdBin string

// bins holds the binaries the tests build, removed when they end.
var bins *snagdtest.Dir

func TestMain(m *testing.M) {
	var err error
	if bins, err = snagdtest.NewDir("snagd-test-"); err == nil {
		snagdBin, err = bins.Build("snagd", snagdtest.Snagd, "-race", "-tags", failpoint.Tag)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := pgtest.Main(m)
	bins.Remove()
	os.Exit(code)
}

// daemon is a snagd under test: a process (startDaemon, spawn), or Run
// inside the test process (startInProcess, inproc_test.go). p and cmd are
// a process's alone; cancel and ready an in-process one's.
type daemon struct {
	t     *testing.T
	p     *snagdtest.Process
	root  string
	home  string
	cmd   *exec.Cmd
	port  int
	token string
	log   *snagdtest.Buffer
	done  chan struct{} // closed when the process has exited (Run has returned)
	err   error         // its exit error, once done is closed

	cancel context.CancelFunc // ends an in-process Run
	ready  chan struct{}      // closed when an in-process Run is ready
	addr   string             // where an in-process Run serves, once ready is closed
	team   bool               // in team mode (inTeamMode): ready once its leases are reconciled
}

// inProcess reports whether d runs inside the test process.
func (d *daemon) inProcess() bool { return d.cancel != nil }

// sigterm asks d to stop as SIGTERM asks snagd (an in-process Run is
// cancelled) and returns at once; d.done closes once it has.
func (d *daemon) sigterm() {
	if d.inProcess() {
		d.cancel()
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
}

// pid is the process that serves d: snagd's, or the test's own.
func (d *daemon) pid() int {
	if d.inProcess() {
		return os.Getpid()
	}
	return d.cmd.Process.Pid
}

// sampleProject copies .snag-example into a fresh root.
func sampleProject(t *testing.T) string {
	t.Helper()
	return snagdtest.Sample(t)
}

// freePort finds a port the kernel says is free on 127.0.0.1, outside the
// default range so tests never meet a developer's own snagd.
func freePort(t *testing.T) int {
	t.Helper()
	return snagdtest.FreePort(t)
}

// startDaemon runs snagd on root with its own SNAG_HOME and waits until it
// is ready. extra are more flags.
func startDaemon(t *testing.T, root, home string, extra ...string) *daemon {
	t.Helper()
	d := spawn(t, root, home, extra...)
	d.waitReady()
	return d
}

func spawn(t *testing.T, root, home string, extra ...string) *daemon {
	t.Helper()
	return spawnEnv(t, root, home, nil, append([]string{"--log", "debug"}, extra...)...)
}

// spawnEnv starts snagd on root with more environment and flags, on a free
// port unless the flags name one, and returns at once. A test in team mode
// (inTeamMode) gets $SNAG_COORD, unless env sets it already.
func spawnEnv(t *testing.T, root, home string, env []string, flags ...string) *daemon {
	t.Helper()
	dsn := teamDSN(t)
	if dsn != "" && !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, coord.Env+"=") }) {
		env = append(slices.Clip(env), coord.Env+"="+dsn)
	}
	if home == "" {
		home = filepath.Join(t.TempDir(), "home")
	}
	hasPort := false
	for _, a := range flags {
		hasPort = hasPort || a == "--port"
	}
	port := 0
	if !hasPort {
		port = freePort(t)
	}
	p := snagdtest.Start(t, snagdtest.Options{Bin: snagdBin, Root: root, Home: home, Port: port, Args: flags, Env: env})
	d := &daemon{t: t, p: p, root: root, home: home, cmd: p.Cmd, port: port, log: p.Log, done: make(chan struct{}), team: dsn != ""}
	// done closes once err holds the exit error.
	go func() { <-p.Done; d.err = p.Err; close(d.done) }()
	if dsn != "" {
		// Before the process is stopped (cleanups run last first).
		t.Cleanup(func() { d.agreesWithStore(dsn) })
	}
	return d
}

// waitReady waits for .snag/.port and a ready /health; in team mode, also
// for the start's reconcile with the coordination store, until which a
// claim is answered 503.
func (d *daemon) waitReady() {
	d.t.Helper()
	if d.inProcess() {
		d.waitInProcess(20 * time.Second)
	} else {
		d.p.WaitReady(d.t, 20*time.Second)
		d.port, d.token = d.p.Port, d.p.Token
	}
	if d.team {
		d.waitProgress("the start's reconcile with the coordination store", 1, reconciles)
	}
}

func (d *daemon) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", d.port, path) }

// get sends an authorized GET and decodes the JSON answer.
func (d *daemon) get(path string, out any) int {
	return d.do(http.MethodGet, path, nil, out)
}

func (d *daemon) do(method, path string, in, out any) int {
	d.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.url(path), body)
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// raw sends a request built by the caller and returns the response.
func (d *daemon) raw(req *http.Request) *http.Response {
	d.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return resp
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// sse reads server-sent events from the daemon into a channel.
func (d *daemon) sse(ctx context.Context) <-chan string {
	d.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url("/events"), nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	out := make(chan string, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				out <- ev
			}
		}
	}()
	return out
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// progress is the daemon's count of its background work on its primary
// worktree (GET /health?progress=1).
func (d *daemon) progress() api.Progress {
	d.t.Helper()
	var h api.Health
	d.get("/health?progress=1", &h)
	if h.Progress == nil {
		d.t.Fatalf("GET /health?progress=1 answered no progress (ready %v)", h.Ready)
	}
	return *h.Progress
}

// waitProgress waits until the count what picks from the daemon's
// progress reaches at least n: the signal that the work it counts has run
// (two more sweeps: sweeps >= before+2). It fails the test after a
// generous deadline.
func (d *daemon) waitProgress(what string, n int64, count func(api.Progress) int64) {
	d.t.Helper()
	eventually(d.t, fmt.Sprintf("%s to reach %d", what, n), func() bool { return count(d.progress()) >= n })
}

// waitSettled waits until no second look at a file seen missing or broken
// is pending: every one made due has been taken or called off.
func (d *daemon) waitSettled() {
	d.t.Helper()
	eventually(d.t, "no second look pending", func() bool { p := d.progress(); return p.Settles >= p.SettlesDue })
}

// waitSweepsSpan waits until so many sweeps have run since it was called
// that at least span has passed between the first and the last: n sweeps
// seen after a read are n-1 sweep intervals (every) apart at least.
func (d *daemon) waitSweepsSpan(span, every time.Duration) {
	d.t.Helper()
	n := int64(span/every) + 2
	d.waitProgress("sweeps", d.progress().Sweeps+n, sweeps)
}

// sweeps, batches and reconciles pick one count of a Progress,
// for waitProgress.
func sweeps(p api.Progress) int64     { return p.Sweeps }
func batches(p api.Progress) int64    { return p.Batches }
func reconciles(p api.Progress) int64 { return p.Reconciles }
