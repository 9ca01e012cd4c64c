package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/board"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/token"
)

// MaxBody caps a request body; MaxCaptureBody caps POST /captures's,
// which carries two screenshots of up to 8 MiB each in base64.
const (
	MaxBody        = 1 << 20
	MaxCaptureBody = 24 << 20
)

// bodyLimit is the cap of r's body.
func bodyLimit(r *http.Request) int64 {
	if r.Method == http.MethodPost && r.URL.Path == "/captures" {
		return MaxCaptureBody
	}
	return MaxBody
}

// tooLarge says what to do about a body over limit.
func tooLarge(limit int64) string {
	if limit == MaxCaptureBody {
		return "request body over 24 MiB: a capture's screenshot may be at most 8 MiB; capture a smaller window, or the element alone"
	}
	return "request body over 1 MiB"
}

// apiError is an error answer: its HTTP status, and the api.Error every
// error answer carries (a code a program can branch on, and a sentence that
// says what went wrong and what fixes it). It is the operations' error.
type apiError = ops.Error

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, api.Error{Code: e.Code, Message: e.Message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// guard is the gate every request passes: it holds the token and the port
// the daemon is bound to.
type guard struct {
	tok  token.Token
	port int
	// tokenFile is the token file snagd uses, as 401 answers name it: a
	// client that reads another one (another $SNAG_HOME) is told which.
	tokenFile string
	// board, once the board is mounted, lets a browser in with its session
	// cookie instead of the token: on the board's own paths and /events
	// only, never the JSON API (see board.Gate).
	board *board.Gate
	// pair, once the routes are made, holds the pairing codes and the
	// capture credentials of the browser extension (pair.go).
	pair *pairing
}

// loopbackHost reports whether a Host header names this daemon: a loopback
// name with the bound port. Anything else may be a DNS rebinding attack,
// where a page on a hostile name resolves that name to 127.0.0.1.
func (g *guard) loopbackHost(host string) bool {
	h, p, err := net.SplitHostPort(host)
	if err != nil || p != strconv.Itoa(g.port) {
		return false
	}
	switch strings.ToLower(h) {
	case "127.0.0.1", "localhost", "::1":
		return true
	}
	return false
}

// sameOrigin reports whether an Origin header is the daemon's own.
func (g *guard) sameOrigin(origin string) bool {
	scheme, host, ok := strings.Cut(origin, "://")
	return ok && strings.EqualFold(scheme, "http") && !strings.Contains(host, "/") && g.loopbackHost(host)
}

// wrap applies, in order: the Host check, the Origin check, the bearer
// token (except for public paths), the JSON content type on writes (but a
// DELETE without a body), and the body cap. A request without the token to
// a path the board covers goes to the board's gate instead, after the body
// cap: its session cookie, and on a write its CSRF token, a form body and
// an Origin.
//
// The browser extension is the one exception to the Origin check: a
// chrome-extension:// origin is taken on POST /captures and POST /pair
// alone, and only there are CORS headers set (and preflights answered),
// for that origin. A capture credential (snagcap_) opens POST /captures
// alone, from the origin it was paired with; POST /pair needs no token.
func (g *guard) wrap(public func(*http.Request) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.pass(w, r, public, next) })
}

// pass serves r with next once it passes wrap's checks, in wrap's order,
// or answers the refusal.
func (g *guard) pass(w http.ResponseWriter, r *http.Request, public func(*http.Request) bool, next http.Handler) {
	if !g.loopbackHost(r.Host) {
		writeError(w, &apiError{Status: http.StatusForbidden, Code: "bad_host", Message: "snagd answers only to 127.0.0.1, localhost or [::1] with its own port, not " + strconv.Quote(r.Host)})
		return
	}
	// Host names are case-insensitive: what passed is passed on in
	// lower case, so the MCP SDK's own loopback check agrees.
	r.Host = strings.ToLower(r.Host)
	secret, capture := captureBearer(r)
	if capture && (r.Method != http.MethodPost || r.URL.Path != "/captures") {
		writeError(w, errCaptureOnly)
		return
	}
	origin := r.Header.Get("Origin")
	ext := extensionOrigin(origin) && extensionRoute(r)
	if origin != "" && !g.sameOrigin(origin) && !ext {
		writeError(w, &apiError{Status: http.StatusForbidden, Code: "bad_origin", Message: "requests from other origins are refused: call snagd from the snag CLI, the MCP bridge, or its own board"})
		return
	}
	if ext && allowExtension(w, r, origin) {
		return
	}
	r, admitted, e := g.admitExtension(r, secret, capture, origin, ext)
	if e != nil {
		writeError(w, e)
		return
	}
	browser := false
	if !admitted && !public(r) && !g.authorized(r) {
		if g.board == nil || !g.board.Covers(r) {
			g.unauthorized(w, r, "")
			return
		}
		browser = true // the board's gate decides, below
	}
	if e := checkBody(r, browser); e != nil {
		writeError(w, e)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, bodyLimit(r))
	if browser {
		var ok bool
		if r, ok = g.board.Admit(w, r); !ok {
			return
		}
	}
	next.ServeHTTP(w, r)
}

// allowExtension sets the CORS headers for the browser extension's
// origin, and answers a preflight (answered true).
func allowExtension(w http.ResponseWriter, r *http.Request, origin string) (answered bool) {
	w.Header().Set("Access-Control-Allow-Origin", origin)
	w.Header().Add("Vary", "Origin")
	if r.Method == http.MethodOptions {
		preflight(w, r)
		return true
	}
	return false
}

// admitExtension admits, without the token, what the browser extension
// may send: a capture with its credential (the request then carries the
// extension's origin), and a pairing from its origin; it refuses the
// extension anything else. A request it admits acts for no agent's
// session; one it neither admits nor refuses goes on to the token.
func (g *guard) admitExtension(r *http.Request, secret string, capture bool, origin string, ext bool) (_ *http.Request, admitted bool, _ *apiError) {
	switch {
	case capture:
		if e := g.pair.admit(secret, origin); e != nil {
			return r, false, e
		}
		r = r.WithContext(context.WithValue(r.Context(), extensionKey{}, origin))
	case r.Method == http.MethodPost && r.URL.Path == api.PairPath:
		if !ext {
			return r, false, errPairElsewhere
		}
	case ext && r.Header.Get("Authorization") != "":
		return r, false, errTokenFromExtension
	case ext:
		return r, false, errNotPaired
	default:
		return r, false, nil
	}
	r.Header.Del(SessionHeader)
	r.Header.Del(ToolHeader)
	return r, true, nil
}

// checkBody refuses a write whose body is not JSON (but the board's,
// whose gate checks its form, and a DELETE without a body), and a body
// over its route's cap.
func checkBody(r *http.Request, browser bool) *apiError {
	if !browser && isWrite(r.Method) && !(r.Method == http.MethodDelete && r.ContentLength == 0) {
		// A DELETE without a body (an MCP client ending its session
		// on /mcp) carries no type; a browser cannot send one
		// cross-origin without a preflight, which snagd never grants.
		ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || ct != "application/json" {
			return &apiError{Status: http.StatusUnsupportedMediaType, Code: "bad_content_type", Message: "writes must send Content-Type: application/json"}
		}
	}
	if limit := bodyLimit(r); r.ContentLength > limit {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: tooLarge(limit)}
	}
	return nil
}

// unauthorized answers 401 with a WWW-Authenticate: Bearer challenge that
// says, in its error_description as in the JSON body, which token file
// snagd uses, so that an MCP client shows the cause (another $SNAG_HOME, a
// rotated token) instead of starting an OAuth flow. snagd has no OAuth: its
// discovery paths answer 404 (see wellKnown).
func (g *guard) unauthorized(w http.ResponseWriter, r *http.Request, alt string) {
	msg := "send Authorization: Bearer with the token in " + g.tokenFile + " (the snag CLI and snag mcp do this for you)"
	if alt != "" {
		msg += ", " + alt
	}
	challenge := `Bearer realm="snagd"`
	if r.Header.Get("Authorization") != "" {
		msg = "the token sent is not snagd's: " + msg + "; a header pasted into a client's config is a copy that snag token rotate breaks (snag install --http writes one that reads the file's token from the environment)"
		challenge += `, error="invalid_token"`
	}
	challenge += `, error_description="` + quotable(msg) + `"`
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: msg})
}

// quotable makes s fit a quoted-string of an auth-param: printable ASCII
// without a quote or a backslash (RFC 6750 section 3).
func quotable(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b[i] = '?'
		}
	}
	return string(b)
}

// wellKnown answers the OAuth and OpenID discovery paths MCP clients try
// before they authorize (/.well-known/oauth-protected-resource,
// oauth-authorization-server, openid-configuration, with or without /mcp
// appended or prefixed): 404 without auth, so a client learns that snagd
// has no OAuth and falls back to the header it was given, rather than
// taking a 401 there for an OAuth server's refusal.
func wellKnown(r *http.Request) bool {
	p := r.URL.Path
	return strings.HasPrefix(p, "/.well-known/") || strings.HasPrefix(p, MCPPath+"/.well-known/")
}

// authorized checks the bearer token. Tokens in query strings are never
// read: they end up in logs and browser history.
func (g *guard) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	return ok && strings.EqualFold(scheme, "Bearer") && g.tok.Equal(tok)
}

func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// decode reads a JSON request body into v, strictly.
func decode(r *http.Request, v any) *apiError {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: tooLarge(mbe.Limit)}
		}
		if errors.Is(err, io.EOF) {
			return nil // an empty body means no arguments
		}
		return &apiError{Status: http.StatusBadRequest, Code: "bad_json", Message: "request body: " + err.Error()}
	}
	return nil
}
