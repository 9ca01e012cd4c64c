package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/failpoint"
)

// snagdBin is the snagd binary the tests run as a real process. It is built
// with the failpoints tag, which the crash tests arm through FailpointEnv;
// unarmed, it is the snagd make build makes.
var snagdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "snagd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	snagdBin = filepath.Join(dir, "snagd")
	build := exec.Command("go", "build", "-race", "-tags", failpoint.Tag, "-o", snagdBin, "github.com/snagdev/snag/cmd/snagd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build snagd:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is a snagd process under test.
type daemon struct {
	t     *testing.T
	root  string
	home  string
	cmd   *exec.Cmd
	port  int
	token string
	log   *syncBuffer
	done  chan struct{} // closed when the process has exited
	err   error         // its exit error, once done is closed
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sampleProject copies .snag-example into a fresh root.
func sampleProject(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, ".snag"), os.DirFS("../.snag-example")); err != nil {
		t.Fatal(err)
	}
	return root
}

// freePort finds a port the kernel says is free on 127.0.0.1, outside the
// default range so tests never meet a developer's own snagd.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
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
	if home == "" {
		home = filepath.Join(t.TempDir(), "home")
	}
	args := append([]string{"--root", root, "--log", "debug"}, extra...)
	hasPort := false
	for _, a := range extra {
		hasPort = hasPort || a == "--port"
	}
	port := 0
	if !hasPort {
		port = freePort(t)
		args = append(args, "--port", strconv.Itoa(port))
	}
	cmd := exec.Command(snagdBin, args...)
	cmd.Env = append(os.Environ(), "SNAG_HOME="+home)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, root: root, home: home, cmd: cmd, port: port, log: log, done: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("snagd log:\n%s", log.String())
		}
	})
	return d
}

// waitReady waits for .snag/.port and a ready /health.
func (d *daemon) waitReady() {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			d.t.Fatalf("snagd exited: %v\n%s", d.err, d.log.String())
		default:
		}
		if b, err := os.ReadFile(filepath.Join(d.root, ".snag", ".port")); err == nil {
			d.port, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			var h map[string]any
			if resp, err := http.Get(d.url("/health")); err == nil {
				json.NewDecoder(resp.Body).Decode(&h)
				resp.Body.Close()
			}
			if h["ready"] == true && h["pid"] == float64(d.cmd.Process.Pid) {
				tok, err := os.ReadFile(filepath.Join(d.home, "token"))
				if err != nil {
					d.t.Fatal(err)
				}
				d.token = strings.TrimSpace(string(tok))
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.t.Fatalf("snagd not ready in time\n%s", d.log.String())
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
