package daemon_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	snagd "github.com/snagdev/snag/internal/daemon"
)

const samplePath = ".snag/tasks/SNAG-11 - Login form clears the email after a wrong password.md"

func TestHealthAndProof(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startInProcess(t, root, "", snagd.Options{})
	var h struct {
		Service string `json:"service"`
		Root    string `json:"root"`
		PID     int    `json:"pid"`
		Ready   bool   `json:"ready"`
		Proof   string `json:"proof"`
		Counts  struct {
			Tasks int `json:"tasks"`
		} `json:"counts"`
	}
	resp := d.raw(mustReq(t, "GET", d.url("/health?nonce=n1"), nil))
	defer resp.Body.Close()
	decodeJSON(t, resp, &h)
	real, _ := filepath.EvalSymlinks(root)
	if h.Service != "snagd" || h.Root != real || h.PID != d.pid() || h.Counts.Tasks != 20 || h.Proof == "" {
		t.Errorf("health = %+v", h)
	}
}

// TestX1_LoopbackOnly: snagd listens on 127.0.0.1 alone, and with every port
// of its range taken (many repositories served on one machine) it takes
// another free port of 127.0.0.1, where clients find it through its files.
func TestX1_LoopbackOnly(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, sampleProject(t), "", snagd.Options{})
	if _, err := net.DialTimeout("tcp", "[::1]:"+strconv.Itoa(d.port), time.Second); err == nil {
		t.Error("snagd answers on [::1] too; want 127.0.0.1 only")
	}
	for _, ip := range localAddrs(t) {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(d.port)), time.Second); err == nil {
			c.Close()
			t.Errorf("snagd answers on %s", ip)
		}
	}

	var held []net.Listener
	for p := 7654; p <= 7664; p++ {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			held = append(held, ln)
		}
	}
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	second := spawnInProcessOn(t, sampleProject(t), "", 0, snagd.Options{})
	second.waitReady()
	if second.port >= 7654 && second.port <= 7664 {
		t.Errorf("snagd took %d, a port held by another", second.port)
	}
	for _, ip := range localAddrs(t) {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(second.port)), time.Second); err == nil {
			c.Close()
			t.Errorf("snagd beyond its range answers on %s", ip)
		}
	}
	if !strings.Contains(second.log.String(), "snagd serving") {
		t.Errorf("snagd with every port of its range taken did not serve:\n%s", second.log.String())
	}
}

func localAddrs(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		ip, _, _ := net.ParseCIDR(a.String())
		if ip != nil && !ip.IsLoopback() && ip.To4() != nil {
			out = append(out, ip.String())
		}
	}
	return out
}

// TestX2_DNSRebinding: a foreign Host, a wrong port, a foreign or null
// Origin are refused; a loopback host without Origin is accepted.
func TestX2_DNSRebinding(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, sampleProject(t), "", snagd.Options{})
	port := strconv.Itoa(d.port)
	cases := []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:" + port, "", 200},
		{"localhost:" + port, "", 200},
		{"[::1]:" + port, "", 200},
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port, 200},
		{"evil.example:" + port, "", 403},
		{"evil.example", "", 403},
		{"127.0.0.1:1", "", 403},
		{"127.0.0.1:" + port, "http://evil.example", 403},
		{"127.0.0.1:" + port, "null", 403},
		{"127.0.0.1:" + port, "http://127.0.0.1:1", 403},
		{"127.0.0.1:" + port, "https://127.0.0.1:" + port, 403},
		// Host names are case-insensitive, on the API and on /mcp alike.
		{"LOCALHOST:" + port, "", 200},
		{"LocalHost:" + port, "http://LOCALHOST:" + port, 200},
		{"EVIL.example:" + port, "", 403},
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x2","version":"1"}}}`
	for _, c := range cases {
		for _, path := range []string{"/tasks", "/mcp"} {
			req := mustReq(t, "GET", d.url(path), nil)
			if path == "/mcp" {
				req = mustReq(t, "POST", d.url(path), strings.NewReader(initialize))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
			}
			req.Host = c.host
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			req.Header.Set("Authorization", "Bearer "+d.token)
			resp := d.raw(req)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s with Host %q Origin %q: %d; want %d: %s", path, c.host, c.origin, resp.StatusCode, c.want, body)
			}
			if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
				del := mustReq(t, "DELETE", d.url(path), nil)
				del.Header.Set("Authorization", "Bearer "+d.token)
				del.Header.Set("Mcp-Session-Id", sid)
				d.raw(del).Body.Close()
			}
		}
	}
}

// TestX4_UnauthorizedIsNotOAuth: a request without snagd's token gets a 401
// whose WWW-Authenticate: Bearer challenge names the token file snagd uses
// ($SNAG_HOME's), so an MCP client shows that instead of starting OAuth;
// the OAuth and OpenID discovery paths clients probe answer 404 without
// auth.
func TestX4_UnauthorizedIsNotOAuth(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "elsewhere")
	d := startInProcess(t, sampleProject(t), home, snagd.Options{})
	tokenFile := filepath.Join(home, "token")
	for _, c := range []struct{ name, auth, wantErr string }{
		{"no token", "", ""},
		{"wrong token", "Bearer " + strings.Repeat("0", len(d.token)), `error="invalid_token"`},
	} {
		for _, path := range []string{"/mcp", "/tasks", "/events"} {
			req := mustReq(t, "GET", d.url(path), nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp := d.raw(req)
			var body struct{ Error, Message string }
			jsonDecode(resp, &body)
			resp.Body.Close()
			ch := resp.Header.Get("WWW-Authenticate")
			if resp.StatusCode != 401 || !strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, "error_description=") ||
				!strings.Contains(ch, tokenFile) || !strings.Contains(ch, c.wantErr) {
				t.Errorf("%s %s: %d, WWW-Authenticate %q; want 401 with a Bearer challenge naming %s", c.name, path, resp.StatusCode, ch, tokenFile)
			}
			if !strings.Contains(body.Message, tokenFile) || strings.Contains(body.Message, "~/.snag/token") {
				t.Errorf("%s %s: message %q does not name %s", c.name, path, body.Message, tokenFile)
			}
		}
	}
	for _, path := range []string{
		"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
		"/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/mcp",
		"/.well-known/openid-configuration", "/.well-known/openid-configuration/mcp", "/mcp/.well-known/openid-configuration",
	} {
		resp := d.raw(mustReq(t, "GET", d.url(path), nil))
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s without auth: %d; want 404 (snagd has no OAuth)", path, resp.StatusCode)
		}
	}
}

// TestX3_NoSimpleRequestWrites: writes with text/plain or form bodies are
// refused and change nothing; no answer carries CORS headers.
func TestX3_NoSimpleRequestWrites(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startInProcess(t, root, "", snagd.Options{})
	before, _ := os.ReadFile(filepath.Join(root, samplePath))
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		req := mustReq(t, "POST", d.url("/tasks/SNAG-11/cancel"), strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+d.token)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp := d.raw(req)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("POST with %q: %d; want 415", ct, resp.StatusCode)
		}
		for k := range resp.Header {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				t.Errorf("answer has a CORS header %s", k)
			}
		}
	}
	if after, _ := os.ReadFile(filepath.Join(root, samplePath)); !bytes.Equal(before, after) {
		t.Error("a refused write changed the file")
	}
}

// TestX4_Tokens: every wrong way to present the token is refused, and the
// token never appears in the daemon's log.
func TestX4_Tokens(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, sampleProject(t), "", snagd.Options{})
	tok := d.token
	cases := map[string]func(r *http.Request){
		"none":          func(r *http.Request) {},
		"empty":         func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") },
		"wrong":         func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+strings.Repeat("0", len(tok))) },
		"prefix":        func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok[:len(tok)-1]) },
		"suffix":        func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok+"0") },
		"basic scheme":  func(r *http.Request) { r.Header.Set("Authorization", "Basic "+tok) },
		"huge":          func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+strings.Repeat("a", 60<<10)) },
		"query string":  func(r *http.Request) { r.URL.RawQuery = "token=" + tok + "&access_token=" + tok },
		"cookie":        func(r *http.Request) { r.Header.Set("Cookie", "token="+tok) },
		"x-snag-header": func(r *http.Request) { r.Header.Set("X-Snag-Token", tok) },
	}
	for name, set := range cases {
		req := mustReq(t, "GET", d.url("/tasks"), nil)
		set(req)
		resp := d.raw(req)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && !(name == "huge" && resp.StatusCode == 431) {
			t.Errorf("%s: %d; want 401", name, resp.StatusCode)
		}
	}
	if code := d.get("/tasks", nil); code != 200 {
		t.Errorf("the right token: %d", code)
	}
	// What a browser asks for on its own, with no token, is no 401 in the
	// board's console: /favicon.ico answers nothing.
	fav := d.raw(mustReq(t, "GET", d.url("/favicon.ico"), nil))
	fav.Body.Close()
	if fav.StatusCode != http.StatusNoContent {
		t.Errorf("GET /favicon.ico without a token: %d; want 204", fav.StatusCode)
	}
	d.terminate()
	if strings.Contains(d.log.String(), tok) {
		t.Error("the token appears in snagd's log")
	}
}

func TestSecondDaemonForTheSameRootRefuses(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	first := startDaemon(t, root, "")
	second := spawn(t, root, first.home)
	select {
	case <-second.done:
		err := second.err
		want := "another snagd already serves this project (pid " + strconv.Itoa(first.cmd.Process.Pid) + ", port " + strconv.Itoa(first.port) + ")"
		if err == nil || !strings.Contains(second.log.String(), want) {
			t.Errorf("second snagd: %v; log should say %q:\n%s", err, want, second.log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a second snagd for the same root kept running")
	}
}

func TestCleanShutdownRemovesThePortFile(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startDaemon(t, root, "")
	port := filepath.Join(root, ".snag", ".port")
	if _, err := os.Stat(port); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		if err := d.err; err != nil {
			t.Errorf("snagd exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("snagd did not stop on SIGTERM")
	}
	if _, err := os.Stat(port); !os.IsNotExist(err) {
		t.Errorf(".port still there after a clean exit: %v", err)
	}
}

// TestHandEditIsSeen: a person's save reaches the index, plan.json and the
// event stream without any command.
func TestHandEditIsSeen(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startInProcess(t, root, "", snagd.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := d.sse(ctx)
	p := filepath.Join(root, samplePath)
	raw, _ := os.ReadFile(p)
	edited := bytes.Replace(raw, []byte("title: Login form clears the email after a wrong password"), []byte("title: Login form forgets the email"), 1)
	if bytes.Equal(raw, edited) {
		t.Fatal("sample title not found")
	}
	if err := os.WriteFile(p, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new title", func() bool {
		var out struct {
			Row struct{ Title string } `json:"row"`
		}
		d.get("/tasks/SNAG-11", &out)
		return out.Row.Title == "Login form forgets the email"
	})
	eventually(t, "plan.json", func() bool {
		b, _ := os.ReadFile(filepath.Join(root, ".snag", "plan.json"))
		return bytes.Contains(b, []byte("Login form forgets the email"))
	})
	select {
	case ev := <-events:
		if ev != "task" {
			t.Errorf("first event %q; want task", ev)
		}
	case <-time.After(10 * time.Second):
		t.Error("no event for the edit")
	}
}

// TestW4_VSCodeTornWrite: VS Code truncates a file and writes it in place in
// two halves. Polling the API all the while never shows the task missing or
// invalid.
func TestW4_VSCodeTornWrite(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startInProcess(t, root, "", snagd.Options{Settle: editorSettle})
	p := filepath.Join(root, samplePath)
	raw, _ := os.ReadFile(p)
	next := bytes.Replace(raw, []byte("severity: medium"), []byte("severity: high"), 1)

	stop := make(chan struct{})
	bad := make(chan string, 1)
	var looking sync.WaitGroup // done before the test ends and snagd is stopped
	looking.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var out struct {
				Row struct{ State, Title string } `json:"row"`
			}
			code := d.get("/tasks/SNAG-11", &out)
			if code != 200 || out.Row.State != "ok" {
				select {
				case bad <- "status " + strconv.Itoa(code) + " state " + out.Row.State:
				default:
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	for range 3 {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(80 * time.Millisecond)
		f.Write(next[:len(next)/2])
		time.Sleep(80 * time.Millisecond)
		f.Write(next[len(next)/2:])
		f.Close()
		want := "high"
		if !bytes.Contains(next, []byte("severity: high")) {
			want = "medium"
		}
		eventually(t, "the whole write indexed", func() bool {
			var v struct{ Task struct{ Severity string } }
			d.get("/tasks/SNAG-11", &v)
			return v.Task.Severity == want
		})
		next, raw = raw, next
	}
	close(stop)
	looking.Wait()
	select {
	case b := <-bad:
		t.Errorf("the API showed the task broken during a torn write: %s", b)
	default:
	}
}

func mustReq(t *testing.T, method, url string, body *strings.Reader) *http.Request {
	t.Helper()
	var req *http.Request
	var err error
	if body == nil {
		req, err = http.NewRequest(method, url, nil)
	} else {
		req, err = http.NewRequest(method, url, body)
	}
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	if err := jsonDecode(resp, v); err != nil {
		t.Fatal(err)
	}
}
