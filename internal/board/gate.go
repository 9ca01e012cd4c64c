package board

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The board's cookie and the header or form field its pages send the CSRF
// token in.
const (
	cookiePrefix = "snag_board_" // + the port: cookies are not kept apart by port
	csrfHeader   = "X-Snag-CSRF"
	csrfField    = "csrf"
)

// How long a login code and a board session live. A session lives as long
// as the daemon (it is kept in memory) or, unused, for sessionIdle.
const (
	loginCodeTTL = 10 * time.Minute
	sessionIdle  = 12 * time.Hour
)

// Gate is the board's way in: one-time login codes, minted for a person
// who holds the token (snag open, or snagd's own log at start), are traded
// at /login for a session cookie (HttpOnly, SameSite=Strict, a random id
// kept in memory only). A session opens only the paths [Gate.Covers]
// reports (the board's pages and forms, its assets and /events), never the
// JSON API; every write through it carries the session's CSRF token, a
// form body, and an Origin (which snagd's guard has checked is its own).
// Codes and session ids are kept as SHA-256 hashes. A Gate is made by
// [NewServer] and is safe for concurrent use.
type Gate struct {
	port int
	// unauthorized answers a request to /events without the token or a
	// session: snagd's 401.
	unauthorized func(w http.ResponseWriter, r *http.Request, alt string)
	// covers reports whether a path is the board's; open, whether it is
	// served without a session (/login, the stylesheet and script).
	covers, open func(*http.Request) bool
	// refuse answers a request the gate turns away, as a page.
	refuse func(w http.ResponseWriter, r *http.Request, status int, heading, message string)

	mu       sync.Mutex
	codes    map[[32]byte]loginCode
	sessions map[[32]byte]*Session
}

type loginCode struct {
	by      string // the person it was minted for, for the audit log
	expires time.Time
}

// Session is one browser logged in to the board.
type Session struct {
	By   string // the person, as the audit log names them
	CSRF string
	seen time.Time
}

type sessionKey struct{}

// SessionOf returns the board session a request came in with, once the
// gate has admitted it; nil for a request with the token.
func SessionOf(r *http.Request) *Session {
	s, _ := r.Context().Value(sessionKey{}).(*Session)
	return s
}

func newGate(port int) *Gate {
	return &Gate{port: port, codes: map[[32]byte]loginCode{}, sessions: map[[32]byte]*Session{}}
}

func randomText() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("board: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Mint makes a login code for a person: it works once, for 10 minutes.
func (g *Gate) Mint(by string) (code string, expires time.Time) {
	code = randomText()
	expires = time.Now().Add(loginCodeTTL)
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for k, c := range g.codes {
		if now.After(c.expires) {
			delete(g.codes, k)
		}
	}
	g.codes[sha256.Sum256([]byte(code))] = loginCode{by: by, expires: expires}
	return code, expires
}

// LoginURL mints a login code for a person and returns the link that uses
// it, with its expiry.
func (g *Gate) LoginURL(by string) (string, time.Time) {
	code, expires := g.Mint(by)
	return fmt.Sprintf("http://127.0.0.1:%d/login?code=%s", g.port, code), expires
}

func (g *Gate) cookieName() string { return cookiePrefix + strconv.Itoa(g.port) }

// login trades a code, once, for a new session and its cookie.
func (g *Gate) login(code string) (*http.Cookie, bool) {
	h := sha256.Sum256([]byte(code))
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.codes[h]
	delete(g.codes, h) // single use, whatever happens next
	if !ok || time.Now().After(c.expires) {
		return nil, false
	}
	for k, s := range g.sessions {
		if time.Since(s.seen) > sessionIdle {
			delete(g.sessions, k)
		}
	}
	id := randomText()
	g.sessions[sha256.Sum256([]byte(id))] = &Session{By: c.by, CSRF: randomText(), seen: time.Now()}
	return &http.Cookie{Name: g.cookieName(), Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}, true
}

// logout ends the session a request came with.
func (g *Gate) logout(r *http.Request) *http.Cookie {
	if c, err := r.Cookie(g.cookieName()); err == nil {
		g.mu.Lock()
		delete(g.sessions, sha256.Sum256([]byte(c.Value)))
		g.mu.Unlock()
	}
	return &http.Cookie{Name: g.cookieName(), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

func (g *Gate) session(r *http.Request) *Session {
	c, err := r.Cookie(g.cookieName())
	if err != nil || len(c.Value) > 128 {
		return nil
	}
	h := sha256.Sum256([]byte(c.Value))
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.sessions[h]
	if !ok {
		return nil
	}
	if time.Since(s.seen) > sessionIdle {
		delete(g.sessions, h)
		return nil
	}
	s.seen = time.Now()
	return s
}

// Covers reports whether a request without the token is the board's to
// let in or turn away: a path of the board's pages, forms and assets, a
// GET of /events, or a browser opening a path nothing else serves. snagd's
// guard answers every other request without the token 401.
func (g *Gate) Covers(r *http.Request) bool { return g.covers != nil && g.covers(r) }

// Admit lets a request without the token through to the board when its
// session cookie is good and, for a write, when it also carries the
// session's CSRF token, a form body and an Origin. It answers the request
// itself (a 401 page, 403, 415) when it does not let it through; the
// request it returns carries the session (see [SessionOf]).
func (g *Gate) Admit(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if g.open(r) {
		return r, true
	}
	s := g.session(r)
	if s == nil {
		if r.URL.Path == "/events" {
			g.unauthorized(w, r, "or log in to the board (snag open)")
			return nil, false
		}
		g.refuse(w, r, http.StatusUnauthorized, "Log in to the board",
			"This board needs a login link from snagd. Run this in the project, and it opens one for you (or prints it):")
		return nil, false
	}
	if isWrite(r.Method) {
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch {
		case r.Header.Get("Origin") == "":
			// A browser sends Origin with every POST; a write without one
			// did not come from the board's own pages.
			g.refuse(w, r, http.StatusForbidden, "Refused", "a change to the board must come from the board's own page (this request had no Origin)")
			return nil, false
		case ct != "application/x-www-form-urlencoded":
			g.refuse(w, r, http.StatusUnsupportedMediaType, "Refused", "the board's forms send application/x-www-form-urlencoded")
			return nil, false
		}
		tok := r.Header.Get(csrfHeader)
		if tok == "" {
			if err := r.ParseForm(); err != nil {
				g.refuse(w, r, http.StatusBadRequest, "Refused", "the form could not be read: "+err.Error())
				return nil, false
			}
			tok = r.PostForm.Get(csrfField)
		}
		if subtle.ConstantTimeCompare([]byte(tok), []byte(s.CSRF)) != 1 {
			g.refuse(w, r, http.StatusForbidden, "Refused",
				"this form did not carry the board's CSRF token: reload the board and try again")
			return nil, false
		}
	}
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)), true
}

func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}
