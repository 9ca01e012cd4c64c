package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/token"
)

// HostedTokenEnv names the variable that holds the hosted token when
// --hosted-token-file is not given.
const HostedTokenEnv = "SNAG_HOSTED_TOKEN"

// HostedTokenHint is where a person keeps a hosted token, as messages
// suggest it: inside the per-user folder, which is the user's alone.
const HostedTokenHint = "~/.snag/hosted-token"

// Hosted configures snagd's hosted /mcp: a second listener, beside the
// usual one on 127.0.0.1, that serves /mcp and nothing else to agents on
// other machines. It speaks TLS 1.2 or later (plain HTTP only on a
// loopback address, for a TLS proxy or an SSH tunnel in front of it),
// answers only to the Host names it allows, and takes a token of its own,
// never snagd's local one, so that it can be revoked without touching
// local clients.
type Hosted struct {
	// Listen is the address, HOST:PORT. One that is not loopback needs
	// TLSCert and TLSKey.
	Listen string
	// TLSCert and TLSKey are the PEM files of the certificate and its
	// private key: both or neither.
	TLSCert, TLSKey string
	// AllowedHosts are the names a request's Host may carry: NAME with or
	// without the listener's port, NAME:PORT with that port only (a proxy
	// in front that listens on another). None: Listen's host, unless it is
	// a wildcard (0.0.0.0, ::, or none), which must name them.
	AllowedHosts []string
	// TokenFile holds the hosted token: a regular file of mode 0600, not
	// a link, at least 32 bytes. It is read again whenever it changes, so
	// rewriting it revokes the old token (and ends the sessions opened
	// with it) without a restart.
	TokenFile string
	// Token is the hosted token itself, used when TokenFile is "" (the
	// command line takes it from $SNAG_HOSTED_TOKEN). Never log it.
	Token string
}

// hostedMCP is the hosted listener's gate and its state.
type hostedMCP struct {
	d      *Daemon
	listen string      // as given
	tls    *tls.Config // nil: plain HTTP, on loopback only
	hosts  []allowedHost
	secret *hostedSecret
	port   string // the bound port, once listening
}

// allowedHost is one name a Host header may carry; port "" allows the
// name alone or with the listener's port.
type allowedHost struct{ name, port string }

func (a allowedHost) String() string {
	n := a.name
	if strings.Contains(n, ":") {
		n = "[" + n + "]"
	}
	if a.port != "" {
		n += ":" + a.port
	}
	return n
}

// hostedKey marks, in a request's context, a request that came over the
// hosted listener.
type hostedKey struct{}

// isHosted reports whether r came over the hosted listener.
func isHosted(r *http.Request) bool { return r.Context().Value(hostedKey{}) != nil }

// credOf names the credential r came with, which binds the handles it
// makes (engine.Handle): the hosted token in force, or snagd's local one.
// The name is a digest; it never holds the secret.
func (d *Daemon) credOf(r *http.Request) string {
	if c, ok := r.Context().Value(hostedKey{}).(string); ok {
		return c
	}
	return localCred(d.tok)
}

// localCred and hostedCred name a token for the handles made with it.
func localCred(t token.Token) string  { return "local:" + engine.HashHandle(t.String())[:16] }
func hostedCred(t token.Token) string { return "hosted:" + engine.HashHandle(t.String())[:16] }

// newHosted checks o and reads its certificate and token, so that snagd
// refuses to start, naming the fix, rather than serve a hosted /mcp that
// is open or broken. main is snagd's local token, which the hosted one
// must not be.
func newHosted(d *Daemon, o Hosted, main token.Token) (*hostedMCP, error) {
	host, port, err := net.SplitHostPort(o.Listen)
	if err != nil || port == "" {
		return nil, fmt.Errorf("--listen %q: want HOST:PORT, as 0.0.0.0:8443 or snag.example.com:8443", o.Listen)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return nil, fmt.Errorf("--listen %q: want a port from 0 to 65535", o.Listen)
	}
	h := &hostedMCP{d: d, listen: o.Listen}
	loopback, wildcard := hostKind(host)

	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, fmt.Errorf("--listen %s: give --tls-cert FILE and --tls-key FILE together", o.Listen)
	}
	if o.TLSCert == "" && !loopback {
		return nil, fmt.Errorf("--listen %s is not a loopback address: serving /mcp to other machines needs TLS: give --tls-cert FILE and --tls-key FILE (or listen on 127.0.0.1 behind a TLS proxy or an SSH tunnel)", o.Listen)
	}
	if o.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert %s --tls-key %s: %w: give a PEM certificate (its chain after it) and its PEM private key", o.TLSCert, o.TLSKey, err)
		}
		h.tls = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}

	names := o.AllowedHosts
	if len(names) == 0 {
		if wildcard {
			return nil, fmt.Errorf("--listen %s listens on every address: name the host agents reach it by with --allowed-host NAME (repeat it for more names)", o.Listen)
		}
		names = []string{host}
	}
	for _, n := range names {
		a, err := parseAllowedHost(n)
		if err != nil {
			return nil, err
		}
		h.hosts = append(h.hosts, a)
	}

	h.secret = &hostedSecret{path: o.TokenFile, main: main, log: d.log}
	switch {
	case o.TokenFile != "":
		tok, err := token.ReadFile(o.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--hosted-token-file: %w", err)
		}
		h.secret.tok = tok
		h.secret.stamp, _ = stampOf(o.TokenFile)
	case o.Token != "":
		tok, err := token.Parse(o.Token)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", HostedTokenEnv, err)
		}
		h.secret.tok = tok
	default:
		return nil, fmt.Errorf("--listen %s needs a hosted token of at least %d bytes, not snagd's own: make one with %s, then give --hosted-token-file %s (or set $%s to it)",
			o.Listen, token.MinSize, token.MakeCommand(HostedTokenHint), HostedTokenHint, HostedTokenEnv)
	}
	if main.Equal(h.secret.tok.String()) {
		return nil, fmt.Errorf("the hosted token is snagd's own local token: make a separate one, so that it can be revoked without touching local clients: %s", token.MakeCommand(HostedTokenHint))
	}
	return h, nil
}

// hostKind says whether a listen address's host is loopback (127.0.0.0/8,
// ::1, localhost) or a wildcard (every address). Any other name counts as
// neither, whatever it resolves to.
func hostKind(host string) (loopback, wildcard bool) {
	if strings.EqualFold(host, "localhost") {
		return true, false
	}
	if host == "" {
		return false, true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false, false
	}
	return ip.IsLoopback(), ip.IsUnspecified()
}

// parseAllowedHost reads one --allowed-host: NAME or NAME:PORT, an IPv6
// address in brackets or bare.
func parseAllowedHost(s string) (allowedHost, error) {
	bad := func(why string) (allowedHost, error) {
		return allowedHost{}, fmt.Errorf("--allowed-host %q: %s", s, why)
	}
	if strings.Contains(s, "/") {
		return bad("want a host name as a client's Host header carries it, as snag.example.com, not a URL")
	}
	a := allowedHost{name: s}
	if h, p, err := net.SplitHostPort(s); err == nil {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("want a port from 1 to 65535 after the colon")
		}
		a = allowedHost{name: h, port: p}
	} else {
		a.name = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	a.name = strings.ToLower(a.name)
	if a.name == "" || strings.ContainsAny(a.name, " *@?#") {
		return bad("want a host name, as snag.example.com or 192.0.2.7")
	}
	if _, wildcard := hostKind(a.name); wildcard {
		return bad("a wildcard address is no Host a client sends: name the host agents reach snagd by")
	}
	return a, nil
}

// allowed reports whether a Host header names this listener.
func (h *hostedMCP) allowed(host string) bool {
	name, port := strings.ToLower(host), ""
	if n, p, err := net.SplitHostPort(name); err == nil {
		name, port = n, p
	} else {
		name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	}
	for _, a := range h.hosts {
		if a.name != name {
			continue
		}
		if a.port == port || (a.port == "" && port == h.port) {
			return true
		}
	}
	return false
}

// allowedNames lists the allowed names, as 403 answers and the log name them.
func (h *hostedMCP) allowedNames() string {
	var out []string
	for _, a := range h.hosts {
		out = append(out, a.String())
	}
	return strings.Join(out, ", ")
}

// sameOrigin reports whether an Origin header names an allowed host with
// the listener's scheme.
func (h *hostedMCP) sameOrigin(origin string) bool {
	scheme, host, ok := strings.Cut(origin, "://")
	want := "https"
	if h.tls == nil {
		want = "http"
	}
	return ok && strings.EqualFold(scheme, want) && !strings.Contains(host, "/") && h.allowed(host)
}

// wrap is the hosted listener's gate, in order: the Host must be an
// allowed name (403), a present Origin one of them too (403), the path
// /mcp (404: the JSON API, the board, /events and /health are not served
// here, nor OAuth discovery, so a client learns there is none), the
// method POST, GET or DELETE (405), the hosted token (401), a JSON body on
// a POST (415) of at most MaxBody (413). It never sets CORS headers.
func (h *hostedMCP) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.allowed(r.Host) {
			writeError(w, &apiError{Status: http.StatusForbidden, Code: "bad_host", Message: "this snagd's hosted /mcp answers only to Host " + h.allowedNames() + " (a name without a port also with :" + h.port + "), not " +
				strconv.Quote(r.Host) + ": reach it by one of those names, or have its owner add one with --allowed-host NAME"})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !h.sameOrigin(o) {
			writeError(w, &apiError{Status: http.StatusForbidden, Code: "bad_origin", Message: "requests from other origins are refused: call /mcp from an MCP client, not a web page"})
			return
		}
		if r.URL.Path != MCPPath {
			writeError(w, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "this listener serves only " + MCPPath + " (MCP over Streamable HTTP, with a bearer token; no OAuth): point the MCP client at " + MCPPath})
			return
		}
		switch r.Method {
		case http.MethodPost, http.MethodGet, http.MethodDelete:
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Code: "bad_method", Message: MCPPath + " takes POST, GET and DELETE only"})
			return
		}
		msg, sent, cred := h.secret.check(r)
		if msg != "" {
			h.unauthorized(w, msg, sent)
			return
		}
		if r.Method == http.MethodPost {
			ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || ct != "application/json" {
				writeError(w, &apiError{Status: http.StatusUnsupportedMediaType, Code: "bad_content_type", Message: "POST " + MCPPath + " must send Content-Type: application/json"})
				return
			}
		}
		if r.ContentLength > MaxBody {
			writeError(w, &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: "request body over 1 MiB"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		h.d.lastUse.Store(time.Now().UnixNano())
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), hostedKey{}, cred)))
	})
}

// unauthorized answers 401 with a Bearer challenge, so an MCP client shows
// the cause instead of starting an OAuth flow. It names neither the token
// nor where the server keeps it.
func (h *hostedMCP) unauthorized(w http.ResponseWriter, msg string, sent bool) {
	challenge := `Bearer realm="snagd"`
	if sent {
		challenge += `, error="invalid_token"`
	}
	challenge += `, error_description="` + quotable(msg) + `"`
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: msg})
}

// listenOn binds the hosted address, and learns the port it got.
func (h *hostedMCP) listenOn(ctx context.Context) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", h.listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w (choose another address or port)", h.listen, err)
	}
	h.port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	return ln, nil
}

// server is the hosted listener's HTTP server over next (the /mcp
// handler), with the local server's limits: header and read timeouts, a
// 64 KiB header, no write timeout (a GET stream lasts as long as its
// session).
func (h *hostedMCP) server(next http.Handler) *http.Server {
	return &http.Server{
		Handler:           h.wrap(next),
		TLSConfig:         h.tls,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(h.d.log.Handler(), slog.LevelDebug),
	}
}

// serve serves srv on ln, over TLS when it has a certificate, until srv
// is shut down.
func (h *hostedMCP) serve(srv *http.Server, ln net.Listener) error {
	var err error
	if h.tls != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("snagd: hosted /mcp on %s: %w", h.listen, err)
	}
	return nil
}

// hostedSecret is the hosted token. One read from a file is read again
// whenever the file changes (a stat per request): a new token there takes
// effect at once and ends the sessions opened with the old one; a file
// removed or made unusable refuses every request until it is fixed.
type hostedSecret struct {
	path     string      // "" when the token came from the environment
	main     token.Token // snagd's local token, which the hosted one must not be
	log      *slog.Logger
	onChange func(old token.Token) // the token changed: end the sessions and handles opened with the old one

	mu    sync.Mutex
	tok   token.Token // the zero Token, which matches nothing, while the file is unusable
	stamp fileStamp
}

// fileStamp tells one version of a file from another.
type fileStamp struct {
	ino, size uint64
	mtime     int64 // Unix nanoseconds
	mode      os.FileMode
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{size: uint64(fi.Size()), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}

// current is the token in force, the file read again if it changed.
func (s *hostedSecret) current() token.Token {
	if s.path == "" {
		return s.tok
	}
	st, statErr := stampOf(s.path)
	s.mu.Lock()
	if statErr == nil && st == s.stamp {
		defer s.mu.Unlock()
		return s.tok
	}
	old := s.tok
	tok, err := token.ReadFile(s.path)
	if err == nil && s.main.Equal(tok.String()) {
		err = fmt.Errorf("%s holds snagd's own local token: make a separate one with %s", s.path, token.MakeCommand(s.path))
	}
	if err != nil {
		// Say so once: when the file changed, or when it went away from
		// under a token in force (a file that stays gone is not news on
		// every request). token's errors name the file and the fix,
		// never the secret.
		if statErr == nil || !zero(old) {
			s.log.Warn("hosted /mcp: the hosted token file is unusable: every hosted request is refused until it is fixed", "err", err)
		}
		tok = token.Token{}
	}
	s.tok, s.stamp = tok, st
	s.mu.Unlock()
	if old.Equal(tok.String()) || zero(old) && zero(tok) {
		return tok
	}
	if !zero(tok) {
		s.log.Info("hosted /mcp: the hosted token file changed: the new token is in force", "file", s.path)
	}
	if !zero(old) && s.onChange != nil {
		s.log.Info("hosted /mcp: ending the sessions opened with the old token")
		s.onChange(old)
	}
	return tok
}

// zero reports whether t is the zero Token, which matches nothing.
func zero(t token.Token) bool { return t.String() == "" }

// check is "" when r carries the hosted token, else the 401's message;
// sent says whether r carried a token at all; cred names the token that
// passed, for the handles the request makes (credOf). Tokens in query
// strings are never read.
func (s *hostedSecret) check(r *http.Request) (msg string, sent bool, cred string) {
	tok := s.current()
	how := "send Authorization: Bearer with this snagd's hosted token (its owner set it with --hosted-token-file or $" + HostedTokenEnv +
		"); pass it from your MCP client's environment or secret store, as in --header 'Authorization: Bearer ${SNAG_TOKEN}' (single quotes, so the shell leaves the variable for the client), never in a committed config"
	h := r.Header.Get("Authorization")
	if h == "" {
		return how, false, ""
	}
	scheme, presented, _ := strings.Cut(h, " ")
	presented = strings.TrimSpace(presented)
	switch {
	case !strings.EqualFold(scheme, "Bearer"):
		return "the Authorization header is not a bearer token: " + how, true, ""
	case tok.Equal(presented):
		return "", true, hostedCred(tok)
	case len(presented) < token.MinSize:
		return fmt.Sprintf("the token sent is %d bytes, and a hosted token has at least %d: %s", len(presented), token.MinSize, how), true, ""
	}
	return "the token sent is not this snagd's hosted token (it may have been replaced): " + how, true, ""
}
