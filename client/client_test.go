package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/snagdtest"
)

// serve runs a real daemon for root on a free port, in this process, until
// the test ends.
func serve(t *testing.T, root, home string) int {
	t.Helper()
	return serveOn(t, root, home, snagdtest.FreePort(t))
}

// serveInRange runs the daemon on a free port of snagd's own range, where
// clients without a .port file look.
func serveInRange(t *testing.T, root, home string) int {
	t.Helper()
	for p := client.FirstPort; p <= client.LastPort; p++ {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			ln.Close()
			return serveOn(t, root, home, p)
		}
	}
	t.Fatal("every port of 7654-7664 is taken")
	return 0
}

func serveOn(t *testing.T, root, home string, port int) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{Root: root, Home: home, Port: port, Ready: func(string) { close(ready) }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("daemon not ready")
	}
	return port
}

// failpointSnagd builds snagd with its failpoints compiled in, for a test
// that slows its start, and returns the binary's path.
func failpointSnagd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "snagd")
	if err := snagdtest.Build(bin, snagdtest.Snagd, "-tags", failpoint.Tag); err != nil {
		t.Fatal(err)
	}
	return bin
}

func newProject(t *testing.T, dir string) string {
	t.Helper()
	if _, err := project.Init(dir); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	return real
}

func TestDialFindsTheProjectsDaemon(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	root := newProject(t, t.TempDir())
	port := serve(t, root, home)
	c, err := client.Dial(context.Background(), root, client.Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Health(); h.Root != root || h.Port != port {
		t.Errorf("found %+v; want root %s port %d", h, root, port)
	}
	if _, err := c.List(context.Background(), api.ListQuery{}); err != nil {
		t.Errorf("an authorized call: %v", err)
	}
	if err := c.Recheck(context.Background()); err != nil {
		t.Errorf("Recheck of a live daemon: %v", err)
	}
}

// TestAnotherProjectsDaemonIsNeverUsed: the error names the daemon found
// and the command that starts the right one.
func TestAnotherProjectsDaemonIsNeverUsed(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	other := newProject(t, t.TempDir())
	port := serve(t, other, home)
	mine := newProject(t, t.TempDir())
	os.WriteFile(filepath.Join(mine, ".snag", ".port"), []byte(strconv.Itoa(port)), 0o644)
	_, err := client.Dial(context.Background(), mine, client.Options{Home: home})
	if !errors.Is(err, client.ErrNoDaemon) {
		t.Fatalf("Dial: %v; want ErrNoDaemon", err)
	}
	for _, want := range []string{"snagd on :" + strconv.Itoa(port) + " serves " + other + ", not " + mine, "snag daemon --root " + mine} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestAnotherProjectsSlowDaemonIsNamed: another project's snagd on the port
// this project's .port names, too slow for the first probe (stopped here,
// as a loaded machine leaves it unscheduled), is asked again with more
// patience and named, instead of an error that says nothing runs there.
func TestAnotherProjectsSlowDaemonIsNamed(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	other := newProject(t, t.TempDir())
	p := snagdtest.Start(t, snagdtest.Options{Bin: failpointSnagd(t), Root: other, Home: home, Port: snagdtest.FreePort(t)})
	p.WaitReady(t, 30*time.Second)
	mine := newProject(t, t.TempDir())
	os.WriteFile(filepath.Join(mine, ".snag", ".port"), []byte(strconv.Itoa(p.Port)), 0o644)
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := time.AfterFunc(600*time.Millisecond, func() { p.Cmd.Process.Signal(syscall.SIGCONT) })
	defer func() { resumed.Stop(); p.Cmd.Process.Signal(syscall.SIGCONT) }()
	_, err := client.Dial(t.Context(), mine, client.Options{Home: home})
	if !errors.Is(err, client.ErrNoDaemon) {
		t.Fatalf("Dial: %v; want ErrNoDaemon", err)
	}
	if want := "snagd on :" + strconv.Itoa(p.Port) + " serves " + other + ", not " + mine; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

// TestX6_SquatterNeverSeesTheToken: something on the daemon's port that
// says it is snagd but cannot prove it holds the token is never sent it.
func TestX6_SquatterNeverSeesTheToken(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	root := newProject(t, t.TempDir())
	newProject(t, t.TempDir())
	serve(t, newProject(t, t.TempDir()), home) // creates the token
	var sawAuth atomic.Bool
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			sawAuth.Store(true)
		}
		json.NewEncoder(w).Encode(map[string]any{"service": "snagd", "root": root, "pid": 1,
			"port": ln.Addr().(*net.TCPAddr).Port, "ready": true, "proof": strings.Repeat("ab", 32)})
	})}
	go srv.Serve(ln)
	defer srv.Close()
	os.WriteFile(filepath.Join(root, ".snag", ".port"), []byte(strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)), 0o644)
	_, err := client.Dial(context.Background(), root, client.Options{Home: home})
	if !errors.Is(err, client.ErrNoDaemon) || !strings.Contains(err.Error(), "cannot prove it holds your token") {
		t.Errorf("Dial with a squatter: %v", err)
	}
	if sawAuth.Load() {
		t.Error("the squatter was sent the token")
	}
}

// TestWorktreesShareOneDaemon: a client in a second worktree of the same
// repository finds the first worktree's daemon, which serves it through a
// view of its own: its own files, the repository's live state.
func TestWorktreesShareOneDaemon(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed: .ci/run must install it")
		}
		t.Skip("git is not installed")
	}
	tmp, _ := filepath.EvalSymlinks(t.TempDir())
	main := filepath.Join(tmp, "main")
	os.Mkdir(main, 0o755)
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(main, "init", "-q")
	newProject(t, main)
	git(main, "add", ".snag")
	git(main, "commit", "-qm", "snag")
	wt := filepath.Join(tmp, "wt")
	git(main, "worktree", "add", "-q", wt)
	home := filepath.Join(tmp, "home")
	port := serveInRange(t, main, home)
	c, err := client.Dial(context.Background(), wt, client.Options{Home: home})
	if err != nil {
		t.Fatalf("Dial from the second worktree: %v", err)
	}
	if h := c.Health(); h.Port != port || h.Root != wt || h.Worktree != wt || h.Repository != filepath.Join(main, ".git", "snag") {
		t.Errorf("found %+v; want the main worktree's daemon on %d serving %s through its own view", h, port, wt)
	}
}

// TestDialLeavesOtherPortsAloneWhenNoDaemonRuns: with no .snag/.port and a
// free lock, no snagd serves the project, and discovery connects to none of
// 7654-7664, where other projects' daemons may listen.
func TestDialLeavesOtherPortsAloneWhenNoDaemonRuns(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	root := newProject(t, t.TempDir())
	serve(t, newProject(t, t.TempDir()), home) // creates the token
	var conns atomic.Int32
	for p := client.FirstPort; p <= client.LastPort; p++ {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // another program's: it is left alone just the same
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				c.Close()
			}
		}()
	}
	for _, lock := range []bool{false, true} {
		if lock {
			// A lock file left by a daemon that has exited: free.
			os.WriteFile(filepath.Join(root, ".snag", client.LockFile), []byte("12345 7654\n"), 0o644)
		}
		_, err := client.Dial(context.Background(), root, client.Options{Home: home})
		if !errors.Is(err, client.ErrNoDaemon) {
			t.Fatalf("Dial: %v; want ErrNoDaemon", err)
		}
	}
	// The lock file's port is asked (it may be the daemon's), no other.
	if n := conns.Load(); n > 1 {
		t.Errorf("discovery connected %d times to ports of 7654-7664; want at most the one the lock file names", n)
	}
}

// TestDialWaitsForASlowStartAsLongAsItAnswers: a daemon whose first read
// of the task files takes longer than ReadyWait (a big project) is waited
// for, not given up on, since it answers /health all along. The slow start
// is a failpoint's sleep, in a snagd built with the failpoints tag.
func TestDialWaitsForASlowStartAsLongAsItAnswers(t *testing.T) {
	old := client.ReadyWait
	client.ReadyWait = 500 * time.Millisecond
	t.Cleanup(func() { client.ReadyWait = old })
	home := filepath.Join(t.TempDir(), "home")
	root := newProject(t, t.TempDir())
	p := snagdtest.Start(t, snagdtest.Options{Bin: failpointSnagd(t), Root: root, Home: home, Port: snagdtest.FreePort(t),
		Env: []string{daemon.FailpointEnv + "=start:opened=sleep:2s"}}) // the first rescan starts 2 s late
	ctx := t.Context()
	var c *client.Client
	deadline := time.Now().Add(20 * time.Second)
	for c == nil {
		// Until the daemon has bound and written .port, there is none to
		// wait for; then Dial must wait for its rescan.
		cl, err := client.Dial(ctx, root, client.Options{Home: home})
		switch {
		case err == nil:
			c = cl
		case !errors.Is(err, client.ErrNoDaemon) || time.Now().After(deadline):
			t.Fatalf("Dial: %v", err)
		default:
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !c.Health().Ready {
		t.Errorf("Dial returned a daemon that is not ready: %+v", c.Health())
	}
	p.Stop()
	if !strings.Contains(p.Log.String(), "failpoint start:opened: sleeping") {
		t.Errorf("snagd's start was not slowed by its failpoint: the test proved nothing\n%s", p.Log.String())
	}
}

// TestDialWaitsForADaemonThatHoldsTheLockBeforeItAnswers: a snagd that has
// bound its port and taken the project's lock, and then answers nothing for
// seconds (a loaded machine, many commands starting at once), is the one
// that will serve: a command waits for it, with the lock's shortcut or
// without, instead of saying no snagd serves the project.
func TestDialWaitsForADaemonThatHoldsTheLockBeforeItAnswers(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	root := newProject(t, t.TempDir())
	p := snagdtest.Start(t, snagdtest.Options{Bin: failpointSnagd(t), Root: root, Home: home, Port: snagdtest.FreePort(t),
		Env: []string{daemon.FailpointEnv + "=start:" + daemon.StepListening + "=sleep:4s"}})
	// The lock is held, and its file names the port snagd has bound.
	listening := func() bool {
		held, _ := client.LockHeld(root)
		b, _ := os.ReadFile(filepath.Join(root, ".snag", client.LockFile))
		return held && len(strings.Fields(string(b))) >= 2
	}
	deadline := time.Now().Add(20 * time.Second)
	for !listening() {
		if time.Now().After(deadline) {
			t.Fatalf("snagd never took the project's lock and named its port\n%s", p.Log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx := t.Context()
	// Discovery first, while snagd answers nothing; then the lock's shortcut.
	for _, quick := range []bool{false, true} {
		c, err := client.Dial(ctx, root, client.Options{Home: home, Quick: quick})
		if err != nil {
			t.Fatalf("Dial (quick %v) while snagd holds the lock and answers nothing yet: %v", quick, err)
		}
		if _, err := c.List(ctx, api.ListQuery{}); err != nil {
			t.Errorf("List (quick %v): %v", quick, err)
		}
	}
	p.Stop()
	if !strings.Contains(p.Log.String(), "failpoint start:listening: sleeping") {
		t.Errorf("snagd's start was not held by its failpoint: the test proved nothing\n%s", p.Log.String())
	}
}

// TestQuickDialTrustsOnlyAHeldLock: with Options.Quick, a client whose
// project's lock is held by this user's snagd on the port .port names sends
// the command's own request first, with no /health before it; a lock file
// that names a squatter's port but is not held is not trusted, and the
// squatter never sees the token (X6 with the lock's shortcut).
func TestQuickDialTrustsOnlyAHeldLock(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	root := newProject(t, t.TempDir())
	port := serve(t, root, home)
	c, err := client.Dial(context.Background(), root, client.Options{Home: home, Quick: true})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if h := c.Health(); h.Port != port || h.PID != os.Getpid() || h.Ready || h.Proof != "" {
		t.Errorf("Health after a quick Dial = %+v; want the lock's pid and port and nothing a /health says (no round trip)", h)
	}
	if _, err := c.List(context.Background(), api.ListQuery{}); err != nil {
		t.Errorf("List through the lock's port: %v", err)
	}
	if h, err := c.Fresh(context.Background()); err != nil || !h.Ready || h.Proof == "" {
		t.Errorf("Fresh = %+v, %v; want snagd's /health", h, err)
	}

	other := newProject(t, t.TempDir())
	var sawAuth atomic.Bool
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	squat := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			sawAuth.Store(true)
		}
		json.NewEncoder(w).Encode(map[string]any{"service": "snagd", "root": other, "pid": os.Getpid(), "port": squat, "ready": true})
	})}
	go srv.Serve(ln)
	defer srv.Close()
	// A lock file left behind (nothing holds it) naming this process and
	// the squatter's port, and a .port that agrees.
	os.WriteFile(filepath.Join(other, ".snag", client.LockFile), []byte(strconv.Itoa(os.Getpid())+" "+strconv.Itoa(squat)+"\n"), 0o644)
	os.WriteFile(filepath.Join(other, ".snag", ".port"), []byte(strconv.Itoa(squat)+"\n"), 0o644)
	if _, err := client.Dial(context.Background(), other, client.Options{Home: home, Quick: true}); !errors.Is(err, client.ErrNoDaemon) {
		t.Errorf("quick Dial with a lock nothing holds: %v, want ErrNoDaemon", err)
	}
	if sawAuth.Load() {
		t.Error("the squatter was sent the token")
	}
}
