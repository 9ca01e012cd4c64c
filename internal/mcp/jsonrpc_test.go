package mcp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/snagdtest"
)

// tsFrame is a JSON-RPC message as snag mcp writes it.
type tsFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// TestRawJSONRPC speaks newline-delimited JSON-RPC to `snag mcp` over a
// pipe: initialize, notifications/initialized, tools/list, ping, then
// malformed lines, each followed by a ping. A malformed line gets a parse
// error (-32700), the server keeps serving, and stdout carries JSON-RPC
// frames only. No daemon runs: none is needed to list tools or to ping.
func TestRawJSONRPC(t *testing.T) {
	t.Parallel()
	bin := snagBin // built by TestMain in mcp_test.go
	root := tsProject(t)
	home := filepath.Join(t.TempDir(), "home")

	cmd := exec.Command(bin, "mcp", "--no-autostart")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SNAG_HOME="+home, "SNAG_PORT="+strconv.Itoa(snagdtest.FreePort(t)))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &snagdtest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed once snag mcp has exited
	var exitErr error
	defer func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("snag mcp (%v) stderr:\n%s", exitErr, stderr.String())
		}
	}()

	// Every line of stdout must be a JSON-RPC 2.0 frame.
	frames := make(chan tsFrame, 16)
	bad := make(chan string, 1)
	go func() {
		defer close(frames)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			var f tsFrame
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil || f.JSONRPC != "2.0" {
				select {
				case bad <- sc.Text():
				default:
				}
				continue
			}
			frames <- f
		}
		exitErr = cmd.Wait()
		close(exited)
	}()

	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("write %s: %v", line, err)
		}
	}
	// next waits for the next frame that is not a notification from the server.
	next := func(what string) tsFrame {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case line := <-bad:
				t.Fatalf("stdout carried a line that is not a JSON-RPC frame: %q", line)
			case f, ok := <-frames:
				if !ok {
					t.Fatalf("snag mcp closed stdout waiting for the answer to %s", what)
				}
				if f.ID == nil && f.Method != "" {
					continue
				}
				return f
			case <-timeout:
				t.Fatalf("no answer to %s in 10 s", what)
			}
		}
	}
	result := func(what, id string) json.RawMessage {
		t.Helper()
		f := next(what)
		if string(f.ID) != id {
			t.Fatalf("%s: answer has id %s, want %s", what, f.ID, id)
		}
		if f.Error != nil {
			t.Fatalf("%s: error %d %s", what, f.Error.Code, f.Error.Message)
		}
		if f.Result == nil {
			t.Fatalf("%s: no result", what)
		}
		return f.Result
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-jsonrpc-test","version":"1.0.0"}}}`)
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
	}
	if err := json.Unmarshal(result("initialize", "1"), &init); err != nil {
		t.Fatal(err)
	}
	if init.ProtocolVersion == "" || init.ServerInfo.Name == "" {
		t.Fatalf("initialize: protocol version %q, server %q", init.ProtocolVersion, init.ServerInfo.Name)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	var tools struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(result("tools/list", "2"), &tools); err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 8 {
		t.Errorf("tools/list: %d tools, want the 8 of the queue toolset", len(tools.Tools))
	}

	send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	result("ping", "3")

	// Not JSON at all, then an object cut short at the end of its line (a
	// client that died mid-write): the line ends the message either way.
	for i, line := range []string{`this is not json`, `{"jsonrpc":"2.0","id":99,"method":"ping",`} {
		what := fmt.Sprintf("the malformed line %q", line)
		send(line)
		f := next(what)
		if f.Error == nil {
			t.Fatalf("%s: answered without an error: id %s, result %s", what, f.ID, f.Result)
		}
		if f.Error.Code != -32700 {
			t.Errorf("%s: error code %d (%s), want -32700 (parse error)", what, f.Error.Code, f.Error.Message)
		}
		if id := string(f.ID); id != "" && id != "null" {
			t.Errorf("%s: error has id %s, want null", what, id)
		}
		id := strconv.Itoa(10 + i)
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
		result("a ping after "+what, id)
	}

	// Arguments a hostile or careless client sends: each gets an answer
	// (a tool error or a result), and the server keeps serving.
	for i, args := range []string{`null`, `[1]`, `"x"`, `7`, `{"limit":"x"}`, `{"limit":null}`, `{"nope":1}`} {
		id := strconv.Itoa(20 + i)
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"snag_list","arguments":` + args + `}}`)
		if f := next("snag_list with arguments " + args); string(f.ID) != id || (f.Error == nil && f.Result == nil) {
			t.Fatalf("snag_list with arguments %s: answer with id %s, error %v, result %s", args, f.ID, f.Error, f.Result)
		}
		send(`{"jsonrpc":"2.0","id":` + id + `0,"method":"ping"}`)
		result("a ping after snag_list with arguments "+args, id+"0")
	}

	// The end of its input ends the server cleanly, with nothing more on stdout.
	stdin.Close()
	for {
		select {
		case line := <-bad:
			t.Fatalf("stdout carried a line that is not a JSON-RPC frame: %q", line)
		case f, ok := <-frames:
			if !ok {
				select {
				case line := <-bad:
					t.Fatalf("stdout carried a line that is not a JSON-RPC frame: %q", line)
				default:
				}
				if exitErr != nil {
					t.Errorf("snag mcp after its stdin closed: %v", exitErr)
				}
				return
			}
			if f.ID != nil {
				t.Errorf("an answer nobody asked for: id %s", f.ID)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("snag mcp still running 10 s after its stdin closed")
		}
	}
}
