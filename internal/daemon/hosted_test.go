package daemon_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
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
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/token"
)

// The hosted /mcp (issue 17): snagd --listen ADDR serves /mcp alone to
// agents on other machines, over TLS, to the Host names it allows, with a
// token of its own. These tests run real snagd processes and speak real
// TLS to them with a certificate they make.

// hostedName is the name the tests' certificate is for and the hosted
// listener allows; the tests' client dials it at 127.0.0.1.
const hostedName = "snag.test"

// hostedCert writes a self-signed certificate for hostedName, localhost
// and 127.0.0.1, and its key, into a fresh folder; pool trusts it.
func hostedCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	return snagdtest.Cert(t, hostedName, "localhost", "127.0.0.1")
}

// newHostedToken is a fresh hosted token, as openssl rand -hex 32 makes one.
func newHostedToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// writeSecret writes a token file of mode 0600.
func writeSecret(t *testing.T, path, secret string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, 0o600)
}

// hostedDaemon is a snagd with a hosted listener.
type hostedDaemon struct {
	*daemon
	hport     int
	tok       string // the hosted token
	tokenFile string
	pool      *x509.CertPool // nil: plain HTTP
}

// startHosted starts snagd with a hosted listener on 127.0.0.1 over TLS,
// allowing hostedName, with a hosted token in a file; extra are more
// flags. At the test's end it stops snagd and fails the test if the
// hosted token, or snagd's own, appears anywhere in its log.
func startHosted(t *testing.T, extra ...string) *hostedDaemon {
	t.Helper()
	certFile, keyFile, pool := hostedCert(t)
	h := &hostedDaemon{hport: freePort(t), tok: newHostedToken(t), pool: pool,
		tokenFile: filepath.Join(t.TempDir(), "hosted-token")}
	writeSecret(t, h.tokenFile, h.tok)
	flags := append([]string{"--listen", "127.0.0.1:" + strconv.Itoa(h.hport), "--tls-cert", certFile, "--tls-key", keyFile,
		"--allowed-host", hostedName, "--hosted-token-file", h.tokenFile}, extra...)
	h.daemon = startDaemon(t, sampleProject(t), "", flags...)
	noTokenInLog(t, h.daemon, func() []string { return []string{h.tok, h.daemon.token} })
	return h
}

// noTokenInLog stops d at the test's end and fails the test if any of the
// secrets appears in what it wrote.
func noTokenInLog(t *testing.T, d *daemon, secrets func() []string) {
	t.Cleanup(func() {
		d.p.Stop()
		log := d.log.String()
		for _, s := range secrets() {
			if s != "" && strings.Contains(log, s) {
				t.Errorf("a token appears in snagd's log:\n%s", log)
			}
		}
		if !strings.Contains(log, "hosted /mcp serving") {
			t.Errorf("snagd's log does not say it serves the hosted /mcp:\n%s", log)
		}
	})
}

func (h *hostedDaemon) scheme() string {
	if h.pool == nil {
		return "http"
	}
	return "https"
}

// hurl is a URL of the hosted listener, by hostedName.
func (h *hostedDaemon) hurl(path string) string {
	return fmt.Sprintf("%s://%s:%d%s", h.scheme(), hostedName, h.hport, path)
}

// transport dials hostedName at 127.0.0.1 and trusts the test's
// certificate.
func (h *hostedDaemon) transport() *http.Transport {
	var d net.Dialer
	return &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: h.pool},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, port, err := net.SplitHostPort(addr); err == nil && host == hostedName {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return d.DialContext(ctx, network, addr)
		},
	}
}

// bearer adds the token it holds to every request, as an MCP host adds a
// header from its environment.
type bearer struct {
	tok  atomic.Pointer[string]
	next http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if tok := b.tok.Load(); tok != nil {
		r.Header.Set("Authorization", "Bearer "+*tok)
	}
	return b.next.RoundTrip(r)
}

// connect connects the go-sdk client to the hosted /mcp with tok, in MCP
// 2025-11-25 (an MCP session).
func (h *hostedDaemon) connect(t *testing.T, tok, query string) (*sdk.ClientSession, *bearer, error) {
	t.Helper()
	return h.connectIn(t, tok, query, legacyEra)
}

// connectIn connects the go-sdk client to the hosted /mcp with tok, in the
// protocol era opts names.
func (h *hostedDaemon) connectIn(t *testing.T, tok, query string, era *sdk.ClientSessionOptions) (*sdk.ClientSession, *bearer, error) {
	t.Helper()
	b := &bearer{next: h.transport()}
	b.tok.Store(&tok)
	c := sdk.NewClient(&sdk.Implementation{Name: "hosted-test", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.hurl("/mcp" + query), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: b}}, era)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, b, err
}

const hostedInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// send sends one request to the hosted listener; set maps header names to
// values ("Host" sets the request's host). A session the answer starts is
// ended at once.
func (h *hostedDaemon) send(t *testing.T, method, path, body string, set map[string]string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.hurl(path), rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range set {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: h.transport()}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		del, _ := http.NewRequest(http.MethodDelete, h.hurl("/mcp"), nil)
		del.Header.Set("Authorization", "Bearer "+h.tok)
		del.Header.Set("Mcp-Session-Id", sid)
		if r, err := c.Do(del); err == nil {
			r.Body.Close()
		}
	}
	return resp, string(b)
}

// refused runs snagd with args and environment, which must refuse to
// start: it returns what snagd said. It fails the test if snagd started
// or bound its local port.
func refused(t *testing.T, env []string, args ...string) string {
	t.Helper()
	root := sampleProject(t)
	home := filepath.Join(t.TempDir(), "home")
	if _, err := token.Load(home); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, snagdBin, append([]string{"--root", root, "--port", strconv.Itoa(freePort(t))}, args...)...)
	cmd.Env = append(append(os.Environ(), "SNAG_HOME="+home), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("snagd %s kept running; want a refusal:\n%s", strings.Join(args, " "), out)
	}
	if err == nil {
		t.Fatalf("snagd %s exited 0; want a refusal:\n%s", strings.Join(args, " "), out)
	}
	if _, err := os.Stat(filepath.Join(root, ".snag", ".port")); err == nil {
		t.Errorf("snagd %s wrote .snag/.port: it served before refusing", strings.Join(args, " "))
	}
	return string(out)
}

// TestHostedMCPRefusesPlainOffLoopback: a hosted listener on an address
// other machines reach, without a certificate and key, is refused before
// snagd serves anything, and the error names --tls-cert and --tls-key.
func TestHostedMCPRefusesPlainOffLoopback(t *testing.T) {
	t.Parallel()
	tokenFile := filepath.Join(t.TempDir(), "hosted-token")
	writeSecret(t, tokenFile, newHostedToken(t))
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":8443", "192.0.2.7:8443", hostedName + ":8443"} {
		t.Run(addr, func(t *testing.T) {
			out := refused(t, nil, "--listen", addr, "--allowed-host", hostedName, "--hosted-token-file", tokenFile)
			if !strings.Contains(out, "--tls-cert") || !strings.Contains(out, "--tls-key") || !strings.Contains(out, "not a loopback address") {
				t.Errorf("snagd's refusal does not name --tls-cert and --tls-key:\n%s", out)
			}
		})
	}
}

// TestHostedMCPX5_RefusesWithoutAGoodToken: with no hosted token, a short
// one, one others can read, a link, or snagd's own local token, snagd
// refuses to start, names the fix (how to make one), and never says the
// token.
func TestHostedMCPX5_RefusesWithoutAGoodToken(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := hostedCert(t)
	tls := []string{"--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile}
	short := newHostedToken(t)[:31]
	cases := []struct {
		name string
		env  func(t *testing.T) []string
		args func(t *testing.T) []string
		want string
	}{
		{"no token", nil, nil, "openssl rand -hex 32"},
		{"a 31-byte token file", nil, func(t *testing.T) []string {
			f := filepath.Join(t.TempDir(), "hosted-token")
			writeSecret(t, f, short)
			return []string{"--hosted-token-file", f}
		}, "31 bytes, want at least 32"},
		{"a 31-byte $SNAG_HOSTED_TOKEN", func(t *testing.T) []string { return []string{"SNAG_HOSTED_TOKEN=" + short} }, nil, "31 bytes, want at least 32"},
		{"a token file readable by others", nil, func(t *testing.T) []string {
			f := filepath.Join(t.TempDir(), "hosted-token")
			writeSecret(t, f, newHostedToken(t))
			chmod(t, f, 0o644)
			return []string{"--hosted-token-file", f}
		}, "chmod 600"},
		{"a token file that is a link", nil, func(t *testing.T) []string {
			target := filepath.Join(t.TempDir(), "real")
			writeSecret(t, target, newHostedToken(t))
			f := filepath.Join(t.TempDir(), "hosted-token")
			if err := os.Symlink(target, f); err != nil {
				t.Fatal(err)
			}
			return []string{"--hosted-token-file", f}
		}, "symbolic link"},
		{"a missing token file", nil, func(t *testing.T) []string {
			return []string{"--hosted-token-file", filepath.Join(t.TempDir(), "nothing")}
		}, "openssl rand -hex 32"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var env, args []string
			if c.env != nil {
				env = c.env(t)
			}
			if c.args != nil {
				args = c.args(t)
			}
			out := refused(t, env, append(append([]string{}, tls...), args...)...)
			if !strings.Contains(out, c.want) {
				t.Errorf("snagd's refusal does not say %q:\n%s", c.want, out)
			}
			if strings.Contains(out, short) {
				t.Errorf("snagd's refusal says the token:\n%s", out)
			}
		})
	}

	// snagd's own token is no hosted token: revoking one must not touch
	// the other's clients.
	t.Run("snagd's own token", func(t *testing.T) {
		root := sampleProject(t)
		home := filepath.Join(t.TempDir(), "home")
		own, err := token.Load(home)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "hosted-token")
		writeSecret(t, f, own.String())
		cmd := exec.Command(snagdBin, append([]string{"--root", root, "--port", strconv.Itoa(freePort(t)), "--hosted-token-file", f}, tls...)...)
		cmd.Env = append(os.Environ(), "SNAG_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "snagd's own local token") || strings.Contains(string(out), own.String()) {
			t.Errorf("snagd over its own token as the hosted one: %v:\n%s", err, out)
		}
	})
}

// TestHostedMCPRefusesOtherMisconfigurations: a taken address, a wildcard
// address with no --allowed-host, a certificate without its key, a key
// that is not the certificate's, an --allowed-host that is a URL, and
// hosted flags without --listen are each refused, naming the fix.
func TestHostedMCPRefusesOtherMisconfigurations(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := hostedCert(t)
	otherCert, _, _ := hostedCert(t)
	tokenFile := filepath.Join(t.TempDir(), "hosted-token")
	writeSecret(t, tokenFile, newHostedToken(t))
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a taken address", []string{"--listen", taken.Addr().String()}, "choose another address or port"},
		{"a wildcard without --allowed-host", []string{"--listen", "0.0.0.0:0", "--tls-cert", certFile, "--tls-key", keyFile}, "--allowed-host NAME"},
		{"a certificate without its key", []string{"--listen", "127.0.0.1:0", "--tls-cert", certFile}, "--tls-cert FILE and --tls-key FILE together"},
		{"a key that is not the certificate's", []string{"--listen", "127.0.0.1:0", "--tls-cert", otherCert, "--tls-key", keyFile}, "give a PEM certificate"},
		{"an --allowed-host that is a URL", []string{"--listen", "127.0.0.1:0", "--allowed-host", "https://" + hostedName}, "not a URL"},
		{"hosted flags without --listen", []string{"--tls-cert", certFile, "--tls-key", keyFile}, "give --listen ADDR"},
		{"a --listen that is no address", []string{"--listen", hostedName}, "want HOST:PORT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := refused(t, nil, append(c.args, "--hosted-token-file", tokenFile)...)
			if !strings.Contains(out, c.want) {
				t.Errorf("snagd's refusal does not say %q:\n%s", c.want, out)
			}
		})
	}
}

// TestHostedMCPX2_ForeignHostIsRefused: the hosted listener answers only
// to the names --allowed-host gave (it repeats), with or without its own
// port; any other Host, a wrong port or a foreign Origin gets 403 naming
// the allowed names.
func TestHostedMCPX2_ForeignHostIsRefused(t *testing.T) {
	t.Parallel()
	h := startHosted(t, "--allowed-host", "Other.Test")
	port := strconv.Itoa(h.hport)
	auth := "Bearer " + h.tok
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{hostedName + ":" + port, "", 200},
		{hostedName, "", 200},
		{"SNAG.Test:" + port, "", 200},
		{"other.test:" + port, "", 200},
		{hostedName + ":" + port, "https://" + hostedName + ":" + port, 200},
		{"evil.example:" + port, "", 403},
		{"evil.example", "", 403},
		{hostedName + ":1", "", 403},
		{"127.0.0.1:" + port, "", 403},
		{"localhost:" + port, "", 403},
		{hostedName + ":" + port, "https://evil.example", 403},
		{hostedName + ":" + port, "http://" + hostedName + ":" + port, 403},
		{hostedName + ":" + port, "null", 403},
	} {
		resp, body := h.send(t, http.MethodPost, "/mcp", hostedInit, map[string]string{"Host": c.host, "Origin": c.origin, "Authorization": auth})
		if resp.StatusCode != c.want {
			t.Errorf("Host %q Origin %q: %d, want %d: %s", c.host, c.origin, resp.StatusCode, c.want, body)
			continue
		}
		if c.want == 403 && c.origin == "" {
			var e struct{ Error, Message string }
			json.Unmarshal([]byte(body), &e)
			if e.Error != "bad_host" || !strings.Contains(e.Message, hostedName) || !strings.Contains(e.Message, "other.test") {
				t.Errorf("Host %q: %s; want bad_host naming %s and other.test", c.host, body, hostedName)
			}
		}
	}
}

// TestHostedMCPX4_BadTokensAreRefused: no token, a wrong one, a short one,
// snagd's own local token, another scheme and a token in the query string
// all get 401 with a JSON error and a Bearer challenge, which never carry
// the token.
func TestHostedMCPX4_BadTokensAreRefused(t *testing.T) {
	t.Parallel()
	h := startHosted(t)
	for _, c := range []struct{ name, auth, query, want string }{
		{"no token", "", "", "send Authorization: Bearer"},
		{"a wrong token", "Bearer " + newHostedToken(t), "", "not this snagd's hosted token"},
		{"a short token", "Bearer " + h.tok[:31], "", "31 bytes"},
		{"an empty token", "Bearer ", "", "0 bytes"},
		{"snagd's own token", "Bearer " + h.daemon.token, "", "not this snagd's hosted token"},
		{"the token with more after it", "Bearer " + h.tok + "x", "", "not this snagd's hosted token"},
		{"another scheme", "Basic " + h.tok, "", "not a bearer token"},
		{"the token in the query", "", "?access_token=" + h.tok + "&token=" + h.tok, "send Authorization: Bearer"},
	} {
		resp, body := h.send(t, http.MethodPost, "/mcp"+c.query, hostedInit, map[string]string{"Authorization": c.auth})
		var e struct{ Error, Message string }
		json.Unmarshal([]byte(body), &e)
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != 401 || e.Error != "unauthorized" || !strings.Contains(e.Message, c.want) || !strings.HasPrefix(ch, `Bearer realm="snagd"`) {
			t.Errorf("%s: %d, WWW-Authenticate %q: %s; want 401 unauthorized saying %q", c.name, resp.StatusCode, ch, body, c.want)
		}
		if strings.Contains(body, h.tok[:31]) || strings.Contains(ch, h.tok[:31]) {
			t.Errorf("%s: the answer carries the token: %s", c.name, body)
		}
	}
	if _, _, err := h.connect(t, "", ""); err == nil {
		t.Error("the go-sdk client connected without a token")
	}
	if _, _, err := h.connect(t, h.tok[:31], ""); err == nil {
		t.Error("the go-sdk client connected with a short token")
	}
}

// TestHostedMCPServesAnAgent: an MCP client on another machine, over TLS
// with the hosted token, initializes, lists the tools and calls them: an
// ordinary /mcp session of the same engine (snagd's local API sees it),
// with the toolsets its URL asks for and the workspace check. TLS below
// 1.2 and plain HTTP are refused.
func TestHostedMCPServesAnAgent(t *testing.T) {
	t.Parallel()
	h := startHosted(t)
	cs, _, err := h.connect(t, h.tok, "")
	if err != nil {
		t.Fatalf("connect over TLS with the hosted token: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Tools) != 8 {
		t.Errorf("%d tools over the hosted /mcp, want the queue toolset's 8", len(tl.Tools))
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "snag_list", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("snag_list: %v %+v", err, res)
	}
	var sc struct {
		Source string
		Tasks  []struct{ Key, Trust string }
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &sc)
	if sc.Source != "daemon" || len(sc.Tasks) == 0 {
		t.Errorf("snag_list over the hosted /mcp: %s", b)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "snag_claim", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("snag_claim: %v %+v", err, res)
	}
	var claimed struct{ Task struct{ Key string } }
	b, _ = json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &claimed)
	if claimed.Task.Key == "" {
		t.Fatalf("snag_claim over the hosted /mcp claimed nothing: %s", b)
	}

	// The same engine: snagd's local API shows the session, over http, and
	// the task it holds.
	var ss api.Sessions
	h.get("/sessions", &ss)
	found := false
	for _, s := range ss.Sessions {
		found = found || s.Client == "hosted-test" && s.Transport == "http"
	}
	if !found {
		t.Errorf("snagd's local /sessions has no hosted-test session over http: %+v", ss.Sessions)
	}
	var task api.TaskDetail
	h.get("/tasks/"+claimed.Task.Key, &task)
	if task.Row.Status != queue.StatusClaimed {
		t.Errorf("%s after a claim over the hosted /mcp: %s; want claimed", claimed.Task.Key, task.Row.Status)
	}

	// A session belongs to the listener that started it: its id is
	// unknown on the local one.
	req := mustReq(t, http.MethodPost, h.url("/mcp"), strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+h.daemon.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if resp := h.raw(req); resp.StatusCode != http.StatusNotFound {
		resp.Body.Close()
		t.Errorf("the hosted session's id on the local listener: %d; want 404", resp.StatusCode)
	} else {
		resp.Body.Close()
	}

	// Its URL asks for toolsets, as on the local listener.
	cs2, _, err := h.connect(t, h.tok, "?toolsets=queue,team")
	if err != nil {
		t.Fatal(err)
	}
	if tl, err := cs2.ListTools(ctx, nil); err != nil || len(tl.Tools) <= 8 {
		t.Errorf("tools with ?toolsets=queue,team: %v, %d", err, len(tl.Tools))
	}

	// The workspace check of /mcp holds here too.
	resp, body := h.send(t, http.MethodPost, "/mcp", hostedInit, map[string]string{"Authorization": "Bearer " + h.tok, "X-Snag-Workspace": "someone-elses"})
	if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, "wrong_workspace") {
		t.Errorf("another workspace: %d: %s; want 421 wrong_workspace", resp.StatusCode, body)
	}

	// Only TLS 1.2 and later, and no plain HTTP.
	old := h.transport()
	old.TLSClientConfig.MinVersion, old.TLSClientConfig.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if resp, err := (&http.Client{Transport: old}).Get(h.hurl("/mcp")); err == nil {
		resp.Body.Close()
		t.Errorf("a TLS 1.1 client was answered: %d", resp.StatusCode)
	}
	plain, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/mcp", h.hport))
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS listener: %d; want 400", plain.StatusCode)
		}
	}
}

// TestHostedMCPServesOnlyMCP: the hosted listener serves POST, GET and
// DELETE /mcp and nothing else: the JSON API, the board, /events, /health
// and OAuth discovery are 404 there (with the token, too), other methods
// on /mcp 405, while the local listener serves them as before.
func TestHostedMCPServesOnlyMCP(t *testing.T) {
	t.Parallel()
	h := startHosted(t)
	auth := map[string]string{"Authorization": "Bearer " + h.tok}
	for _, path := range []string{"/tasks", "/tasks/SNAG-1", "/board", "/events", "/health", "/sessions", "/", "/mcp/",
		"/.well-known/oauth-protected-resource", "/mcp/.well-known/openid-configuration", "/login"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			body := ""
			if method == http.MethodPost {
				body = "{}"
			}
			resp, got := h.send(t, method, path, body, auth)
			if resp.StatusCode != 404 || !strings.Contains(got, `"not_found"`) {
				t.Errorf("%s %s on the hosted listener: %d: %.200s; want 404", method, path, resp.StatusCode, got)
			}
		}
	}
	for _, method := range []string{http.MethodPut, http.MethodPatch, http.MethodOptions, http.MethodHead} {
		resp, _ := h.send(t, method, "/mcp", "", auth)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s /mcp on the hosted listener: %d; want 405 without CORS", method, resp.StatusCode)
		}
	}
	// Bodies are capped and typed as on the local listener.
	resp, got := h.send(t, http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`+strings.Repeat("x", 2<<20)+`"}}`, auth)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB body: %d: %.200s; want 413", resp.StatusCode, got)
	}
	resp, got = h.send(t, http.MethodPost, "/mcp", hostedInit, map[string]string{"Authorization": "Bearer " + h.tok, "Content-Type": "text/plain"})
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a text/plain body: %d: %.200s; want 415", resp.StatusCode, got)
	}
	var health struct{ Service string }
	if code := h.get("/health", &health); code != 200 || health.Service != "snagd" {
		t.Errorf("the local listener's /health: %d %+v", code, health)
	}
}

// TestHostedMCPTokenFileChangeRevokes: rewriting the hosted token file
// puts the new token in force at once, without a restart: the old one
// gets 401, the sessions opened with it are ended, and snagd's local
// clients are untouched. A removed file refuses everyone.
func TestHostedMCPTokenFileChangeRevokes(t *testing.T) {
	t.Parallel()
	h := startHosted(t)
	oldTok := h.tok
	cs, b, err := h.connect(t, oldTok, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}

	newTok := newHostedToken(t)
	writeSecret(t, h.tokenFile, newTok)
	h.tok = newTok
	resp, body := h.send(t, http.MethodPost, "/mcp", hostedInit, map[string]string{"Authorization": "Bearer " + oldTok})
	if resp.StatusCode != 401 {
		t.Errorf("the old token after the file changed: %d: %s; want 401", resp.StatusCode, body)
	}
	// The old session is gone: even with the new token, its id is unknown.
	b.tok.Store(&newTok)
	if _, err := cs.ListTools(ctx, nil); err == nil {
		t.Error("the session opened with the old token goes on after the token changed")
	}
	if _, _, err := h.connect(t, newTok, ""); err != nil {
		t.Errorf("connect with the new token: %v", err)
	}
	if code := h.get("/tasks", nil); code != 200 {
		t.Errorf("the local API with snagd's own token after the hosted token changed: %d", code)
	}

	if err := os.Remove(h.tokenFile); err != nil {
		t.Fatal(err)
	}
	resp, body = h.send(t, http.MethodPost, "/mcp", hostedInit, map[string]string{"Authorization": "Bearer " + newTok})
	if resp.StatusCode != 401 {
		t.Errorf("with the token file removed: %d: %s; want 401", resp.StatusCode, body)
	}
	eventually(t, "a warning that the hosted token file is unusable", func() bool {
		return strings.Contains(h.log.String(), "hosted token file is unusable")
	})
	noTokenInLog(t, h.daemon, func() []string { return []string{oldTok, newTok} })
}

// TestHostedMCPPlainOnLoopback: on a loopback address without TLS the
// hosted listener serves plain HTTP (for a TLS proxy or an SSH tunnel in
// front), says so in the log, takes its token from $SNAG_HOSTED_TOKEN
// (which processes snagd starts never see), and by default allows only
// the address's own host.
func TestHostedMCPPlainOnLoopback(t *testing.T) {
	t.Parallel()
	h := &hostedDaemon{hport: freePort(t), tok: newHostedToken(t)}
	h.daemon = spawnEnv(t, sampleProject(t), "", []string{"SNAG_HOSTED_TOKEN=" + h.tok},
		"--log", "debug", "--listen", "127.0.0.1:"+strconv.Itoa(h.hport))
	h.daemon.waitReady()
	noTokenInLog(t, h.daemon, func() []string { return []string{h.tok, h.daemon.token} })

	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", h.hport)
	for _, c := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:" + strconv.Itoa(h.hport), 200},
		{"127.0.0.1", 200},
		{"localhost:" + strconv.Itoa(h.hport), 403},
		{hostedName + ":" + strconv.Itoa(h.hport), 403},
	} {
		req := mustReq(t, http.MethodPost, url, strings.NewReader(hostedInit))
		req.Host = c.host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+h.tok)
		resp := h.raw(req)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("plain HTTP with Host %q: %d: %s; want %d", c.host, resp.StatusCode, body, c.want)
		}
	}
	if !strings.Contains(h.log.String(), "plain HTTP on loopback") {
		t.Errorf("snagd's log does not warn of plain HTTP:\n%s", h.log.String())
	}
}

// legacyEra pins a go-sdk client to MCP 2025-11-25 (initialize, an MCP
// session), as the hosted tests of that era's sessions mean.
var legacyEra = &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
