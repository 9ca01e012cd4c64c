package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/atomicfile"
	"github.com/snagdev/snag/internal/project"
)

// This file is snagd's half of the browser extension's pairing (issue 18).
// snag pair asks for a pairing code (POST /pairing-codes, with the token);
// the person types it, with snagd's address, into the extension's popup,
// which sends it from its chrome-extension:// origin to POST /pair and gets
// a capture credential back. snagd keeps the credential's SHA-256 only,
// bound to that origin and to this project, in CredentialsFile beside the
// token; the guard takes it on POST /captures alone. Codes live in memory:
// a restart voids them, not the credentials.

// CredentialsFile, in the per-user folder beside the token, holds the
// capture credentials' hashes, mode 0600.
const CredentialsFile = "capture-credentials.json"

// The pairing codes' bounds.
const (
	// codeAlphabet has no 0, O, 1, I, L or U: 30 symbols a person reads
	// and types without doubt, 30^6 (7.3e8) codes of six.
	codeAlphabet = "23456789ABCDEFGHJKMNPQRSTVWXYZ"
	codeLen      = 6
	// maxCodes are open at most; minting another voids the oldest.
	maxCodes = 3
	// maxWrong wrong codes void every open code: with 3 open, a guesser
	// has 10 tries at 3 in 7.3e8 before snag pair must be run again.
	maxWrong = 10
	// tryBurst tries are taken at once, then one per tryEvery.
	tryBurst = 5
	tryEvery = 2 * time.Second
)

// extensionOrigin reports whether origin is a Chrome extension's:
// chrome-extension:// and an id of 32 letters a to p.
func extensionOrigin(origin string) bool {
	id, ok := strings.CutPrefix(origin, "chrome-extension://")
	if !ok || len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 'a' || id[i] > 'p' {
			return false
		}
	}
	return true
}

// extensionRoute reports whether r is for one of the two routes a browser
// extension may call, or their CORS preflight: POST /captures and POST
// /pair.
func extensionRoute(r *http.Request) bool {
	if r.Method != http.MethodPost && r.Method != http.MethodOptions {
		return false
	}
	return r.URL.Path == "/captures" || r.URL.Path == api.PairPath
}

// preflight answers a CORS preflight of an extension route, for the
// extension's origin (which the caller has put in Allow-Origin): POST,
// with the credential and a JSON body.
func preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "POST")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	h.Set("Access-Control-Max-Age", "600")
	if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	w.WriteHeader(http.StatusNoContent)
}

// captureBearer is the capture credential r carries, if its bearer is one.
func captureBearer(r *http.Request) (string, bool) {
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(secret, api.CaptureCredentialPrefix) {
		return "", false
	}
	return secret, true
}

// extensionKey marks, in a request's context, a capture the guard admitted
// by its capture credential; its value is the extension's origin.
type extensionKey struct{}

// fromExtension is the origin of the extension whose capture credential
// admitted r, or "".
func fromExtension(r *http.Request) string {
	o, _ := r.Context().Value(extensionKey{}).(string)
	return o
}

// The guard's answers to the extension.
var (
	errCaptureOnly        = &apiError{Status: http.StatusForbidden, Code: "capture_only", Message: "a capture credential only captures: snagd takes it on POST /captures from the browser extension that paired, and nowhere else; use the snag CLI (which reads the token) or the board (snag open)"}
	errNotPaired          = &apiError{Status: http.StatusUnauthorized, Code: "not_paired", Message: "the browser extension is not paired with this snagd: run snag pair in the project and type the line it prints into the extension's popup"}
	errUnknownCredential  = &apiError{Status: http.StatusUnauthorized, Code: "not_paired", Message: "this capture credential is not one this snagd takes: it was revoked (snag pair --revoke) or paired with another project's snagd; run snag pair in the project and type the line it prints into the extension's popup"}
	errPairElsewhere      = &apiError{Status: http.StatusForbidden, Code: "bad_origin", Message: "pairing is for the snag browser extension: its popup sends the code from its chrome-extension:// origin"}
	errTokenFromExtension = &apiError{Status: http.StatusUnauthorized, Code: "not_paired", Message: "from a browser extension snagd takes only the capture credential pairing gave it, never the token: run snag pair and type the line it prints into the extension's popup"}
)

// pairing holds the open pairing codes and the capture credentials. It is
// safe for concurrent use.
type pairing struct {
	root  string // the project the credentials it makes are bound to
	port  int
	creds *credentials
	log   *slog.Logger
	now   func() time.Time

	mu    sync.Mutex
	codes []openCode // oldest first, at most maxCodes
	wrong int        // wrong codes since the last one minted
	tries float64    // tries left in the bucket, as of filled
	// filled is when tries was last topped up.
	filled time.Time
}

// openCode is a pairing code not yet used.
type openCode struct {
	code    string // codeLen symbols of codeAlphabet, no dash
	expires time.Time
}

func newPairing(home, root string, port int, log *slog.Logger) *pairing {
	return &pairing{root: root, port: port, log: log, now: time.Now, tries: tryBurst,
		creds: &credentials{dir: home, path: filepath.Join(home, CredentialsFile)}}
}

// newCode draws a pairing code: codeLen symbols of codeAlphabet, each
// uniform (bytes of 240 and over, where 256 is not a multiple of 30, are
// drawn again).
func newCode() (string, error) {
	out := make([]byte, 0, codeLen)
	var buf [16]byte
	for len(out) < codeLen {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", err
		}
		for _, b := range buf {
			if b < 240 && len(out) < codeLen {
				out = append(out, codeAlphabet[int(b)%len(codeAlphabet)])
			}
		}
	}
	return string(out), nil
}

// showCode writes a code as people read it: K7M-2QX.
func showCode(c string) string { return c[:3] + "-" + c[3:] }

// readCode is a code as a person typed it, without case, spaces or dashes.
func readCode(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '-' || r == ' ' || r == '\t':
			return -1
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		}
		return r
	}, s)
}

// mint opens a new pairing code, voiding the oldest when maxCodes are open.
func (p *pairing) mint() (api.PairingCode, error) {
	code, err := newCode()
	if err != nil {
		return api.PairingCode{}, fmt.Errorf("pairing code: %w", err)
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropExpired(now)
	if len(p.codes) == maxCodes {
		p.codes = p.codes[1:]
	}
	expires := now.Add(api.PairingCodeTTL)
	p.codes = append(p.codes, openCode{code: code, expires: expires})
	p.wrong = 0
	addr := "127.0.0.1:" + strconv.Itoa(p.port)
	return api.PairingCode{Line: addr + " " + showCode(code), Address: addr, Code: showCode(code), Expires: expires.UTC()}, nil
}

func (p *pairing) dropExpired(now time.Time) {
	live := p.codes[:0]
	for _, c := range p.codes {
		if now.Before(c.expires) {
			live = append(live, c)
		}
	}
	p.codes = live
}

// take uses up the open code typed, or refuses it. Every refusal of a code
// says the same, so a wrong code tells nothing of the open ones; a try
// beyond the bucket is refused before the code is looked at, with how long
// to wait.
func (p *pairing) take(typed string) (wait time.Duration, err *apiError) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tries = min(tryBurst, p.tries+now.Sub(p.filled).Seconds()/tryEvery.Seconds())
	p.filled = now
	if p.tries < 1 {
		secs := int(math.Ceil((1 - p.tries) * tryEvery.Seconds()))
		return time.Duration(secs) * time.Second, &apiError{Status: http.StatusTooManyRequests, Code: "too_many_tries", Message: fmt.Sprintf("pairing codes are coming too fast: try again in %d s", secs)}
	}
	p.tries--
	p.dropExpired(now)
	code := readCode(typed)
	found := -1
	for i, c := range p.codes {
		if subtle.ConstantTimeCompare([]byte(c.code), []byte(code)) == 1 {
			found = i
		}
	}
	if found < 0 {
		p.wrong++
		if p.wrong >= maxWrong {
			p.codes, p.wrong = nil, 0
		}
		return 0, &apiError{Status: http.StatusForbidden, Code: "bad_pairing_code", Message: "that pairing code is not open here: a code works once, for 5 minutes, on the snagd that printed it; run snag pair for a new one and type the whole line it prints"}
	}
	p.codes = append(p.codes[:found], p.codes[found+1:]...)
	return 0, nil
}

// void closes every open code and says how many were open.
func (p *pairing) void() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropExpired(p.now())
	n := len(p.codes)
	p.codes, p.wrong = nil, 0
	return n
}

// pair exchanges an open code for a new capture credential bound to
// origin and this project.
func (p *pairing) pair(code, origin string) (api.Paired, time.Duration, *apiError) {
	if wait, e := p.take(code); e != nil {
		return api.Paired{}, wait, e
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return api.Paired{}, 0, &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "capture credential: " + err.Error()}
	}
	secret := api.CaptureCredentialPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	c := credential{SHA256: hashSecret(secret), Origin: origin, Project: p.root, Paired: p.now().UTC().Truncate(time.Second)}
	if err := p.creds.add(c); err != nil {
		return api.Paired{}, 0, &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
	}
	p.log.Info("browser extension paired", "origin", origin)
	return api.Paired{Credential: secret, Origin: origin, Project: p.root}, 0, nil
}

// admit checks a capture credential sent from origin: one of this
// project's, paired from that origin.
func (p *pairing) admit(secret, origin string) *apiError {
	if p == nil {
		return errUnknownCredential
	}
	c, err := p.creds.find(secret)
	switch {
	case err != nil:
		p.log.Error("capture credentials unreadable", "err", err)
		return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
	case c == nil || c.Project != p.root:
		return errUnknownCredential
	case c.Origin != origin:
		return &apiError{Status: http.StatusForbidden, Code: "bad_origin", Message: "this capture credential was paired from " + c.Origin + " and is taken only from there: pair this extension with snag pair"}
	}
	return nil
}

func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// credential is a capture credential as CredentialsFile keeps it: the
// SHA-256 of the secret, never the secret.
type credential struct {
	SHA256  string    `json:"sha256"`
	Origin  string    `json:"origin"`
	Project string    `json:"project"`
	Paired  time.Time `json:"paired"`
}

// credentialsDoc is CredentialsFile's content.
type credentialsDoc struct {
	Version     int          `json:"version"`
	Credentials []credential `json:"credentials"`
}

// credentials is CredentialsFile: the user's capture credentials, for every
// project, shared by the user's snagd processes. A read is cached until the
// file changes, so a revoke made through another snagd counts at once;
// a write locks the per-user folder (flock) around its read, change and
// atomic replace, so two snagd never lose each other's pairing.
type credentials struct {
	dir, path string

	mu    sync.Mutex
	read  bool      // list was read, from the file of stamp
	stamp fileStamp // the file read (hosted.go), zero for none
	list  []credential
}

// find is the credential whose secret this is, or nil.
func (cs *credentials) find(secret string) (*credential, error) {
	list, err := cs.current()
	if err != nil {
		return nil, err
	}
	h := []byte(hashSecret(secret))
	var found *credential
	for i := range list {
		if subtle.ConstantTimeCompare([]byte(list[i].SHA256), h) == 1 {
			found = &list[i]
		}
	}
	return found, nil
}

// current is the file's list, read again when it changed.
func (cs *credentials) current() ([]credential, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st, err := stampOf(cs.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cs.read, cs.stamp, cs.list = true, fileStamp{}, nil
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("capture credentials: %w", err)
	case cs.read && st == cs.stamp:
		return cs.list, nil
	}
	list, err := readCredentials(cs.path)
	if err != nil {
		return nil, err
	}
	cs.read, cs.stamp, cs.list = true, st, list
	return list, nil
}

// readCredentials reads the file at path, which must be a regular file of
// the user's, readable by no one else.
func readCredentials(path string) ([]credential, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("capture credentials: %w: remove %s and pair again (snag pair)", err, path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("capture credentials: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || (ok && int(st.Uid) != os.Getuid()) {
		return nil, fmt.Errorf("capture credentials: %s is not a regular file of yours: remove it and pair again (snag pair)", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("capture credentials: %s is open to other users (mode %04o): chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("capture credentials: read %s: %w", path, err)
	}
	var doc credentialsDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("capture credentials: %s: %w: remove it and pair again (snag pair)", path, err)
	}
	return doc.Credentials, nil
}

// change applies edit to the file's list under the folder's lock and
// writes the result, mode 0600.
func (cs *credentials) change(edit func([]credential) []credential) error {
	dir, err := os.Open(cs.dir)
	if err != nil {
		return fmt.Errorf("capture credentials: %w", err)
	}
	defer dir.Close()
	if err := syscall.Flock(int(dir.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("capture credentials: lock %s: %w", cs.dir, err)
	}
	defer syscall.Flock(int(dir.Fd()), syscall.LOCK_UN)
	list, err := readCredentials(cs.path)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(credentialsDoc{Version: 1, Credentials: edit(list)}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(cs.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("capture credentials: %w", err)
	}
	return nil
}

func (cs *credentials) add(c credential) error {
	return cs.change(func(list []credential) []credential { return append(list, c) })
}

// revoke empties the file and says how many credentials it held.
func (cs *credentials) revoke() (int, error) {
	n := 0
	err := cs.change(func(list []credential) []credential { n = len(list); return nil })
	return n, err
}

// home is the per-user folder, as Run finds it.
func (d *Daemon) home() string {
	if d.opts.Home != "" {
		return d.opts.Home
	}
	return project.Home()
}

// pairingCode mints a pairing code for a person (snag pair).
func (d *Daemon) pairingCode(ctx context.Context, req api.MoveRequest) (int, any, error) {
	pc, err := d.guard.pair.mint()
	if err != nil {
		return 0, nil, err
	}
	d.log.Info("pairing code minted", "by", req.By, "expires", pc.Expires)
	return http.StatusCreated, pc, nil
}

// pair is POST /pair: the extension's popup exchanges a code for a
// capture credential. The guard let only an extension's origin in.
func (d *Daemon) pair(w http.ResponseWriter, r *http.Request) {
	var req api.PairRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	out, wait, e := d.guard.pair.pair(req.Code, r.Header.Get("Origin"))
	if e != nil {
		if wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
		}
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// listCredentials lists the paired extensions (snag pair --list).
func (d *Daemon) listCredentials(ctx context.Context, _ struct{}) (int, any, error) {
	list, err := d.guard.pair.creds.current()
	if err != nil {
		return 0, nil, err
	}
	out := api.CaptureCredentials{Credentials: []api.CaptureCredential{}}
	for _, c := range list {
		out.Credentials = append(out.Credentials, api.CaptureCredential{Origin: c.Origin, Project: c.Project, Paired: c.Paired})
	}
	return http.StatusOK, out, nil
}

// revokeCredentials revokes every capture credential and voids the open
// codes (snag pair --revoke).
func (d *Daemon) revokeCredentials(ctx context.Context, _ struct{}) (int, any, error) {
	n, err := d.guard.pair.creds.revoke()
	if err != nil {
		return 0, nil, err
	}
	codes := d.guard.pair.void()
	d.log.Info("capture credentials revoked", "credentials", n, "codes", codes)
	return http.StatusOK, api.Revoked{Revoked: n, Codes: codes}, nil
}
