package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test binary doubles as an agent process: with SNAG_TEST_AGENT set it
// registers a session with the snagd of SNAG_TEST_ROOT, holds the session's
// stream (reconnecting to whichever snagd serves the root), and runs
// commands read from stdin, one per line, answering one line each:
//
//	claim [REF]        claim REF, or the next ready task
//	release REF EPOCH REASON...
//	resolve REF EPOCH
//	resolve-code REF EPOCH   answers "code <status> <json>"
//
// Answers are "ok <json>" or "err <status> <json>".
func init() {
	if os.Getenv("SNAG_TEST_AGENT") != "" {
		os.Exit(agentMain())
	}
}

type agentClient struct {
	root, home string
	session    int64
}

func (a *agentClient) base() string {
	b, _ := os.ReadFile(filepath.Join(a.root, ".snag", ".port"))
	return "http://127.0.0.1:" + strings.TrimSpace(string(b))
}

func (a *agentClient) call(method, path string, in any) (int, string) {
	tok, _ := os.ReadFile(filepath.Join(a.home, "token"))
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base()+path, body)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Content-Type", "application/json")
	if a.session != 0 {
		req.Header.Set("X-Snag-Session", strconv.FormatInt(a.session, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func agentMain() int {
	a := &agentClient{root: os.Getenv("SNAG_TEST_ROOT"), home: os.Getenv("SNAG_HOME")}
	code, out := a.call("POST", "/sessions", map[string]any{"name": os.Getenv("SNAG_TEST_AGENT_NAME"),
		"client": "test-agent", "client_version": "1", "pid": os.Getpid(), "transport": "http"})
	if code != 201 {
		fmt.Println("err", code, out)
		return 1
	}
	var s struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	json.Unmarshal([]byte(out), &s)
	a.session = s.ID
	connected := make(chan struct{})
	go func() { // the session's stream, for the whole life of the process
		var once sync.Once
		for {
			tok, _ := os.ReadFile(filepath.Join(a.home, "token"))
			req, _ := http.NewRequest("GET", a.base()+"/sessions/"+strconv.FormatInt(s.ID, 10)+"/stream", nil)
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				if resp.StatusCode == 200 {
					once.Do(func() { close(connected) })
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			time.Sleep(50 * time.Millisecond) // a moment before it reconnects, as a bridge does
		}
	}()
	<-connected
	fmt.Printf("ok {\"session\": %d, \"name\": %q}\n", s.ID, s.Name)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var code int
		var out string
		switch f[0] {
		case "claim":
			if len(f) > 1 {
				code, out = a.call("POST", "/tasks/"+f[1]+"/claim", map[string]any{})
			} else {
				code, out = a.call("POST", "/claim", map[string]any{})
			}
		case "release":
			ep, _ := strconv.ParseInt(f[2], 10, 64)
			code, out = a.call("POST", "/tasks/"+f[1]+"/release", map[string]any{"epoch": ep, "reason": strings.Join(f[3:], " ")})
		case "resolve":
			ep, _ := strconv.ParseInt(f[2], 10, 64)
			code, out = a.call("POST", "/tasks/"+f[1]+"/resolve", map[string]any{"epoch": ep})
		case "resolve-code": // the answer with its status code: "code N <json>"
			ep, _ := strconv.ParseInt(f[2], 10, 64)
			code, out = a.call("POST", "/tasks/"+f[1]+"/resolve", map[string]any{"epoch": ep})
			fmt.Println("code", code, out)
			continue
		default:
			code, out = 0, `"unknown command"`
		}
		if code/100 == 2 {
			fmt.Println("ok", out)
		} else {
			fmt.Println("err", code, out)
		}
	}
	// Standard input closed: the agent host is gone. Stay until killed,
	// like a bridge whose parent has not noticed yet, unless asked to go.
	if os.Getenv("SNAG_TEST_AGENT_EXIT") != "" {
		return 0
	}
	select {}
}

// agent is an agent process under test.
type agent struct {
	t    *testing.T
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	Name string
	done chan struct{}
}

func startAgent(t *testing.T, d *daemon, name string) *agent {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SNAG_TEST_AGENT=1", "SNAG_TEST_ROOT="+d.root, "SNAG_HOME="+d.home, "SNAG_TEST_AGENT_NAME="+name)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, cmd: cmd, in: in, out: bufio.NewScanner(outp), done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-a.done })
	hello := a.line()
	var h struct{ Name string }
	if !strings.HasPrefix(hello, "ok ") || json.Unmarshal([]byte(hello[3:]), &h) != nil {
		t.Fatalf("agent did not start: %q", hello)
	}
	a.Name = h.Name
	return a
}

func (a *agent) line() string {
	a.t.Helper()
	ch := make(chan string, 1)
	go func() {
		if a.out.Scan() {
			ch <- a.out.Text()
		} else {
			ch <- "eof"
		}
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(30 * time.Second):
		a.t.Fatal("agent did not answer")
		return ""
	}
}

// do sends a command and returns the answer line.
func (a *agent) do(cmd string) string {
	a.t.Helper()
	fmt.Fprintln(a.in, cmd)
	return a.line()
}

// claim claims ref (or the next task) and returns the epoch; it fails the
// test when the claim is refused.
func (a *agent) claim(ref string) (key string, epoch int64) {
	a.t.Helper()
	ans := a.do(strings.TrimSpace("claim " + ref))
	var out struct {
		Task  struct{ Key string }
		Epoch int64
	}
	if !strings.HasPrefix(ans, "ok ") || json.Unmarshal([]byte(ans[3:]), &out) != nil || out.Epoch == 0 {
		a.t.Fatalf("claim %s: %s", ref, ans)
	}
	return out.Task.Key, out.Epoch
}
