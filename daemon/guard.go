package daemon

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/snagdev/snag/token"
)

// MaxBody caps a request body.
const MaxBody = 1 << 20

// apiError is the JSON every error answer carries: a code a program can
// branch on, and a sentence that says what went wrong and what fixes it.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, e)
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
	return ok && scheme == "http" && !strings.Contains(host, "/") && g.loopbackHost(host)
}

// wrap applies, in order: the Host check, the Origin check, the bearer
// token (except for public paths), the JSON content type on writes (but a
// DELETE without a body), and the body cap. It never sets CORS headers.
func (g *guard) wrap(public func(*http.Request) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.loopbackHost(r.Host) {
			writeError(w, &apiError{http.StatusForbidden, "bad_host",
				"snagd answers only to 127.0.0.1, localhost or [::1] with its own port, not " + strconv.Quote(r.Host)})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !g.sameOrigin(o) {
			writeError(w, &apiError{http.StatusForbidden, "bad_origin",
				"requests from other origins are refused: call snagd from the snag CLI, the MCP bridge, or its own board"})
			return
		}
		if !public(r) && !g.authorized(r) {
			writeError(w, &apiError{http.StatusUnauthorized, "unauthorized",
				"send Authorization: Bearer with the token in ~/.snag/token (the snag CLI does this for you)"})
			return
		}
		if isWrite(r.Method) && !(r.Method == http.MethodDelete && r.ContentLength == 0) {
			// A DELETE without a body (an MCP client ending its session
			// on /mcp) carries no type; a browser cannot send one
			// cross-origin without a preflight, which snagd never grants.
			ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || ct != "application/json" {
				writeError(w, &apiError{http.StatusUnsupportedMediaType, "bad_content_type",
					"writes must send Content-Type: application/json"})
				return
			}
		}
		if r.ContentLength > MaxBody {
			writeError(w, &apiError{http.StatusRequestEntityTooLarge, "too_large", "request body over 1 MiB"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		next.ServeHTTP(w, r)
	})
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
			return &apiError{http.StatusRequestEntityTooLarge, "too_large", "request body over 1 MiB"}
		}
		if errors.Is(err, io.EOF) {
			return nil // an empty body means no arguments
		}
		return &apiError{http.StatusBadRequest, "bad_json", "request body: " + err.Error()}
	}
	return nil
}
