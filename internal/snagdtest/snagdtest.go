// Package snagdtest is what the tests of snag's packages share to run the
// real thing: it builds snag and snagd, copies the sample project, finds
// free ports, makes self-signed certificates for the hosted /mcp, and
// starts snagd (or snag daemon) as a process of its own, waiting until its
// /health says it is ready.
//
// It is for tests only: no package of snag's but tests imports it
// (archtest checks). It has no _test.go files so that every package's
// tests can import it.
package snagdtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The commands the tests build.
const (
	Snag  = "github.com/snagdev/snag/cmd/snag"
	Snagd = "github.com/snagdev/snag/cmd/snagd"
)

// stampDev keeps the version a test binary reports "dev", so that what a
// model reads (the golden files) does not depend on the commit it was
// built from.
const stampDev = "-ldflags=-X github.com/snagdev/snag/internal/version.stamp=dev"

// NoSQLiteCheckptr turns off the race detector's pointer checks in the
// SQLite driver, a C library translated to Go whose every statement passes
// through unsafe pointers: they were about half of a race-built test's
// processor time there, and they check the driver, not snag. The race
// detector itself stays on everywhere, checkptr in snag's own code too.
// make test passes the same flag.
const NoSQLiteCheckptr = "-gcflags=modernc.org/...=-d=checkptr=0"

// Build builds the command pkg with go build and flags (as "-race" or
// "-tags", "failpoints") into the file out. The binary says version dev.
// A race build leaves the SQLite driver's pointer checks out
// (NoSQLiteCheckptr).
func Build(out, pkg string, flags ...string) error {
	if slices.Contains(flags, "-race") {
		flags = append(slices.Clip(flags), NoSQLiteCheckptr)
	}
	args := append(append([]string{"build", stampDev}, flags...), "-o", out, pkg)
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// Dir is a folder for one test process's binaries (and whatever else the
// tests keep for the whole run, such as generated projects). TestMain makes
// it and removes it once the tests are done. Its methods are safe for
// concurrent use.
type Dir struct {
	// Path is the folder.
	Path string

	mu    sync.Mutex
	built map[string]*built
}

type built struct {
	once sync.Once
	err  error
}

// NewDir makes a fresh folder in the system's temp folder, its name
// starting with prefix.
func NewDir(prefix string) (*Dir, error) {
	p, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	return &Dir{Path: p, built: map[string]*built{}}, nil
}

// Build builds pkg with flags as the file name in the folder, the first
// time it is asked for name, and returns its path. snag (the command [Snag])
// is built into a folder of its own, with snagd beside it. Later calls for the same
// name wait for that build and return its result.
func (d *Dir) Build(name, pkg string, flags ...string) (string, error) {
	d.mu.Lock()
	b, ok := d.built[name]
	if !ok {
		b = &built{}
		d.built[name] = b
	}
	d.mu.Unlock()
	out := filepath.Join(d.Path, name)
	if pkg != Snag {
		b.once.Do(func() { b.err = Build(out, pkg, flags...) })
		return out, b.err
	}
	// snag runs snagd for snag daemon, snag mcp and the commands that open
	// the index: it gets a folder of its own with a snagd built with the
	// same flags beside it, where it looks first.
	out = filepath.Join(d.Path, name+".bin", name)
	b.once.Do(func() {
		if b.err = os.MkdirAll(filepath.Dir(out), 0o755); b.err != nil {
			return
		}
		done := make(chan error, 1)
		go func() { done <- Build(filepath.Join(filepath.Dir(out), "snagd"), Snagd, flags...) }()
		b.err = errors.Join(Build(out, pkg, flags...), <-done)
	})
	return out, b.err
}

// Remove removes the folder and everything in it.
func (d *Dir) Remove() { os.RemoveAll(d.Path) }

// Fataler is what FreePort, SampleDir and CopySample need of a test:
// testing.TB and testscript's TestScript both are.
type Fataler interface {
	Fatalf(format string, args ...any)
}

// Port is a port the kernel says is free on 127.0.0.1, outside snagd's
// default range, so that tests never meet a developer's own snagd.
func Port() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// FreePort is Port, failing the test when there is none.
func FreePort(t Fataler) int {
	port, err := Port()
	if err != nil {
		t.Fatalf("snagdtest: a free port: %v", err)
	}
	return port
}

// SampleDir is the absolute path of the sample project's .snag folder,
// .snag-example at the root of the module the test runs in.
func SampleDir(t Fataler) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("snagdtest: %v", err)
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".snag-example")
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("snagdtest: no go.mod above the test's folder: run the tests inside snag's module")
			return ""
		}
		dir = up
	}
}

// CopySample copies the sample project's .snag folder to root/.snag.
func CopySample(t Fataler, root string) {
	if err := os.CopyFS(filepath.Join(root, ".snag"), os.DirFS(SampleDir(t))); err != nil {
		t.Fatalf("snagdtest: copy the sample project: %v", err)
	}
}

// Sample is a fresh project root (in tb's temp folder) holding a copy of
// the sample project.
func Sample(tb testing.TB) string {
	tb.Helper()
	root := tb.TempDir()
	CopySample(tb, root)
	return root
}

// Buffer is a log a process writes while the test reads it: a bytes.Buffer
// safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Options say how Start runs a daemon.
type Options struct {
	// Bin is snagd, or snag with Daemon set.
	Bin string
	// Daemon runs Bin as "snag daemon".
	Daemon bool
	// Root is the project root, given as --root.
	Root string
	// Home is the daemon's SNAG_HOME, where it keeps its token.
	Home string
	// Port is given as --port when not 0; else the daemon picks its own
	// (SNAG_PORT or the default range) and WaitReady reads it from .port.
	Port int
	// Args are more flags.
	Args []string
	// Env is more environment, after the test's own and SNAG_HOME.
	Env []string
	// StopWait is how long Stop waits after SIGTERM before it kills the
	// daemon (10 s when 0).
	StopWait time.Duration
}

// Process is a daemon Start started.
type Process struct {
	Root, Home string
	// Port is the port it serves, once WaitReady has returned.
	Port int
	// Token is the API token, once WaitReady has returned.
	Token string
	Cmd   *exec.Cmd
	// Log is its stdout and stderr.
	Log *Buffer
	// Done is closed when the process has exited; Err is then its exit
	// error.
	Done chan struct{}
	Err  error

	stopWait time.Duration
	stopOnce sync.Once
}

// Start starts the daemon o describes and returns at once. The test's end
// stops it (Stop) and, if the test failed, logs what it wrote.
func Start(tb testing.TB, o Options) *Process {
	tb.Helper()
	var args []string
	if o.Daemon {
		args = append(args, "daemon")
	}
	args = append(args, "--root", o.Root)
	if o.Port != 0 {
		args = append(args, "--port", strconv.Itoa(o.Port))
	}
	args = append(args, o.Args...)
	cmd := exec.Command(o.Bin, args...)
	cmd.Env = append(append(os.Environ(), "SNAG_HOME="+o.Home), o.Env...)
	p := &Process{Root: o.Root, Home: o.Home, Port: o.Port, Cmd: cmd, Log: &Buffer{}, Done: make(chan struct{}), stopWait: o.StopWait}
	if p.stopWait == 0 {
		p.stopWait = 10 * time.Second
	}
	cmd.Stdout, cmd.Stderr = p.Log, p.Log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.Err = cmd.Wait(); close(p.Done) }()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			label := "snagd"
			if len(o.Env) > 0 {
				label += " (" + strings.Join(shownEnv(o.Env), " ") + ")"
			}
			tb.Logf("%s log:\n%s", label, p.Log.String())
		}
	})
	return p
}

// Stop ends the daemon with SIGTERM, kills it if it has not exited after
// its StopWait, and waits for it. Calls after the first only wait.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done:
		case <-time.After(p.stopWait):
			p.Cmd.Process.Kill()
		}
	})
	<-p.Done
}

// Health is the part of /health the tests wait on.
type Health struct {
	Ready  bool `json:"ready"`
	PID    int  `json:"pid"`
	Counts struct {
		Tasks int `json:"tasks"`
	} `json:"counts"`
}

// Health asks the daemon's /health; the zero Health when it does not
// answer.
func (p *Process) Health() Health {
	var h Health
	if resp, err := http.Get(p.URL("/health")); err == nil {
		json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
	}
	return h
}

// URL is the address of path on the daemon.
func (p *Process) URL(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(p.Port) + path
}

// WaitReady waits, for at most within, until the daemon has written
// .snag/.port and its /health on that port says it is this process and
// ready; then it reads its token. It fails the test if the daemon exits
// first or is not ready in time.
func (p *Process) WaitReady(tb testing.TB, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-p.Done:
			tb.Fatalf("snagd exited: %v\n%s", p.Err, p.Log.String())
		default:
		}
		if b, err := os.ReadFile(filepath.Join(p.Root, ".snag", ".port")); err == nil {
			if port, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				p.Port = port
				if h := p.Health(); h.Ready && h.PID == p.Cmd.Process.Pid {
					tok, err := os.ReadFile(filepath.Join(p.Home, "token"))
					if err != nil {
						tb.Fatal(err)
					}
					p.Token = strings.TrimSpace(string(tok))
					return
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("snagd not ready in %s\n%s", within, p.Log.String())
}

// shownEnv is env as a test's log may show it: the values of variables
// that carry a secret (a DSN with its password, a token) are left out.
func shownEnv(env []string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch u := strings.ToUpper(k); {
		case strings.Contains(u, "COORD"), strings.Contains(u, "TOKEN"), strings.Contains(u, "PASSWORD"), strings.Contains(u, "DSN"):
			out[i] = k + "=(not shown)"
		default:
			out[i] = kv
		}
	}
	return out
}
