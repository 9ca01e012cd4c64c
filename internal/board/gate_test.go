package board_test

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snagdev/snag/internal/board"
)

// gated is a board server on loopback behind its gate, the way snagd's
// guard puts it in front: a request without the token that the gate
// covers goes through Admit, anything else is refused 401 as the guard
// would. Its pages are not drawn (no service, no Backend): these tests
// are of the login, the cookie and the checks on writes, which need none.
// They run with real HTTP on 127.0.0.1 and a real cookie jar.
type gated struct {
	srv    *board.Server
	ts     *httptest.Server
	events atomic.Int32 // requests to /events the gate sent to the guard's 401
}

func startGated(t *testing.T) *gated {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gated{}
	port := ln.Addr().(*net.TCPAddr).Port
	g.srv, err = board.NewServer(nil, nil, board.Options{Port: port, Unauthorized: func(w http.ResponseWriter, r *http.Request, alt string) {
		g.events.Add(1)
		http.Error(w, "no token, "+alt, http.StatusUnauthorized)
	}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	g.srv.Mount(mux)
	// What a request the gate let through reaches: who it is for.
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "events") })
	mux.HandleFunc("GET /tasks", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the JSON API") })
	g.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.srv.Gate().Covers(r) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		r, ok := g.srv.Gate().Admit(w, r)
		if !ok {
			return
		}
		if s := board.SessionOf(r); s != nil && strings.HasPrefix(r.URL.Path, "/board/test/") {
			// Who the gate let in, and the token their forms carry.
			io.WriteString(w, map[string]string{"/board/test/who": s.By, "/board/test/csrf": s.CSRF}[r.URL.Path])
			return
		}
		mux.ServeHTTP(w, r)
	}))
	g.ts.Listener.Close()
	g.ts.Listener = ln
	g.ts.Start()
	t.Cleanup(g.ts.Close)
	return g
}

// jarClient is an HTTP client with a cookie jar that does not follow
// redirects, so each answer is seen.
func jarClient(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestGateLoginCodeWorksOnce: a login link logs a browser in once, with a
// cookie its page's script cannot read and other sites' forms do not
// carry; used again, anywhere, it is refused with the command for a fresh
// one; logging out ends the session.
func TestGateLoginCodeWorksOnce(t *testing.T) {
	g := startGated(t)
	link, expires := g.srv.Gate().LoginURL("dana")
	if !regexp.MustCompile(`^http://127\.0\.0\.1:`+strconv.Itoa(g.ts.Listener.Addr().(*net.TCPAddr).Port)+`/login\?code=[A-Za-z0-9_-]{43}$`).MatchString(link) || expires.IsZero() {
		t.Fatalf("login link %q, expires %v", link, expires)
	}
	b := jarClient(t)
	if resp, body := get(t, b, g.ts.URL+"/board/test/who"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "snag open") {
		t.Fatalf("a page before logging in: %d %s; want 401 naming snag open", resp.StatusCode, body)
	}
	resp, _ := get(t, b, link)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %d to %q; want 303 to / (the code must leave the address bar)", resp.StatusCode, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" ||
		!strings.HasSuffix(cs[0].Name, "_"+strconv.Itoa(g.ts.Listener.Addr().(*net.TCPAddr).Port)) {
		t.Fatalf("login cookie %+v; want one HttpOnly, SameSite=Strict cookie named for the port", cs)
	}
	if resp, body := get(t, b, g.ts.URL+"/board/test/who"); resp.StatusCode != http.StatusOK || body != "dana" {
		t.Errorf("a page after logging in: %d %q; want it opened for dana", resp.StatusCode, body)
	}

	// The session opens the board and /events, not the JSON API.
	if resp, _ := get(t, b, g.ts.URL+"/events"); resp.StatusCode != http.StatusOK {
		t.Errorf("/events with the session: %d", resp.StatusCode)
	}
	if resp, _ := get(t, b, g.ts.URL+"/tasks"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/tasks with the session: %d; want 401", resp.StatusCode)
	}

	// A second use of the link is refused, in another browser as in this one.
	for _, c := range []*http.Client{jarClient(t), b} {
		if resp, body := get(t, c, link); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "does not work") || !strings.Contains(body, "snag open") {
			t.Errorf("a used login link: %d %s; want 401 naming snag open", resp.StatusCode, body)
		}
	}

	// Logging out ends the session.
	req, _ := http.NewRequest(http.MethodPost, g.ts.URL+"/logout", strings.NewReader(url.Values{"csrf": {csrfOf(t, g, b)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", g.ts.URL)
	if resp, err := b.Do(req); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %v %v", resp, err)
	}
	if resp, _ := get(t, b, g.ts.URL+"/board/test/who"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a page after logging out: %d; want 401", resp.StatusCode)
	}
	if resp, _ := get(t, jarClient(t), g.ts.URL+"/events"); resp.StatusCode != http.StatusUnauthorized || g.events.Load() != 1 {
		t.Errorf("/events with no session: %d (%d sent to the guard's 401); want the guard's 401", resp.StatusCode, g.events.Load())
	}
}

// csrfOf is the CSRF token of the browser's session, as its pages carry it.
func csrfOf(t *testing.T, g *gated, b *http.Client) string {
	t.Helper()
	resp, tok := get(t, b, g.ts.URL+"/board/test/csrf")
	if resp.StatusCode != http.StatusOK || len(tok) < 43 {
		t.Fatalf("the session's CSRF token: %d %q", resp.StatusCode, tok)
	}
	return tok
}

// TestGateChecksEveryWrite: a write through a board session needs the
// session's CSRF token (in the header the board's script sends, or the
// form field), a form body and an Origin; each rule refuses on its own.
func TestGateChecksEveryWrite(t *testing.T) {
	g := startGated(t)
	link, _ := g.srv.Gate().LoginURL("dana")
	b := jarClient(t)
	get(t, b, link)
	tok := csrfOf(t, g, b)
	for _, tc := range []struct {
		name, origin, ctype, header, body string
		want                              int
	}{
		{"no token", g.ts.URL, "application/x-www-form-urlencoded", "", "back=/", 403},
		{"wrong token", g.ts.URL, "application/x-www-form-urlencoded", "", "csrf=" + strings.Repeat("A", 43), 403},
		{"wrong token in the header", g.ts.URL, "application/x-www-form-urlencoded", strings.Repeat("A", 43), "csrf=" + tok, 403},
		{"no origin", "", "application/x-www-form-urlencoded", "", "csrf=" + tok, 403},
		{"text/plain", g.ts.URL, "text/plain", "", "csrf=" + tok, 415},
		{"the form field", g.ts.URL, "application/x-www-form-urlencoded", "", "csrf=" + tok, 200},
		{"the header", g.ts.URL, "application/x-www-form-urlencoded", tok, "", 200},
	} {
		req, _ := http.NewRequest(http.MethodPost, g.ts.URL+"/board/test/who", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ctype)
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.header != "" {
			req.Header.Set("X-Snag-CSRF", tc.header)
		}
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || (tc.want == 200) != (string(body) == "dana") {
			t.Errorf("%s: %d %.200s; want %d", tc.name, resp.StatusCode, body, tc.want)
		}
	}
}
