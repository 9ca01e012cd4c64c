// Package client finds the snagd that serves a project and talks to it: the
// snag CLI and the MCP bridge use it (DESIGN section 8).
//
// Discovery reads .snag/.port, then probes 127.0.0.1:7654-7664 for a
// /health that says snagd and serves this project (or, failing that,
// another worktree of the same git repository). Before the token is ever
// sent, the daemon must prove it holds the token too: /health?nonce=X
// answers an HMAC of a fresh nonce, so a squatter on the port never sees it.
// A daemon for another project is never used.
//
// client imports token and the daemon's wire types' shapes only through
// JSON; it opens no database and writes no task file.
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snagdev/snag/gitdir"
	"github.com/snagdev/snag/token"
)

// First and last port probed.
const (
	FirstPort = 7654
	LastPort  = 7664
)

// ErrNoDaemon is returned when no snagd serves the project.
var ErrNoDaemon = errors.New("no snagd serves this project")

// ErrTokenMismatch is wrapped by discovery's error when a snagd answers for
// the project but its proof does not match the token this process read: it
// was started with another token file (another $SNAG_HOME, or a token
// rotated since). Starting another snagd cannot help.
var ErrTokenMismatch = errors.New("snagd's proof does not match this token")

// mismatchError is a snagd of the project whose proof failed.
type mismatchError struct {
	port         int
	root, common string
	tokenFile    string // as messages name it
	path         string // the token file
}

func (e *mismatchError) Error() string {
	tokenFile := e.tokenFile
	if _, err := os.Stat(e.path); err != nil {
		tokenFile += ", which does not exist"
	}
	return fmt.Sprintf("snagd on :%d serves %s, but its proof does not match the token this process reads (%s), "+
		"so it cannot prove it holds your token and was not trusted (nor sent it): most likely it was started with another token file "+
		"($SNAG_HOME differs, or the token was rotated since). "+
		"Give this process the SNAG_HOME snagd has (snag install writes it into an MCP server's env), or restart snagd with this one", e.port, e.root, tokenFile)
}

func (e *mismatchError) Unwrap() error { return ErrTokenMismatch }

// Health is the part of snagd's /health a client reads.
type Health struct {
	Service      string `json:"service"`
	Root         string `json:"root"`
	GitCommonDir string `json:"git_common_dir"`
	PID          int    `json:"pid"`
	Port         int    `json:"port"`
	Version      string `json:"version"`
	Ready        bool   `json:"ready"`
	Polling      bool   `json:"polling"`
	Counts       Counts `json:"counts"`
	Proof        string `json:"proof"`
}

// Counts are the daemon's counts of task rows and of rows with problems.
type Counts struct {
	Tasks    int `json:"tasks"`
	Problems int `json:"problems"`
}

// Client talks to one snagd.
type Client struct {
	root string // the project root, symlinks resolved
	home string
	tok  token.Token
	base string // http://127.0.0.1:PORT
	// mismatch is, after find, a snagd of the project whose proof did not
	// match the token, or nil.
	mismatch *mismatchError
	health   Health
	http     *http.Client
}

// Options tune discovery.
type Options struct {
	Home string // the per-user folder with the token; "" for ~/.snag or $SNAG_HOME
	// Start, when set, is run when no daemon answers, and discovery waits
	// for the daemon it starts, or until the channel it returns is closed
	// (the daemon exited: its log says why).
	Start func(ctx context.Context, root string) (exited <-chan struct{}, err error)
	// Timeout bounds one probe (200 ms).
	Timeout time.Duration
}

// Dial finds the daemon for the project at root.
func Dial(ctx context.Context, root string, opts Options) (*Client, error) {
	abs, err := filepath.Abs(root)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("find snagd: %w", err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 200 * time.Millisecond
	}
	if opts.Home == "" {
		opts.Home = home()
	}
	tok, tokErr := token.Read(opts.Home)
	c := &Client{root: abs, home: opts.Home, tok: tok, http: &http.Client{Timeout: 30 * time.Second}}
	found, notes := c.find(ctx, opts.Timeout) // without a token, nothing proves itself: a snagd that runs is named
	if tokErr != nil && opts.Start == nil {
		if c.mismatch != nil {
			return nil, discoveryError(abs, c.mismatch, notes)
		}
		return nil, fmt.Errorf("%w: %w", ErrNoDaemon, tokErr)
	}
	if found {
		return c, c.awaitReady(ctx)
	}
	if opts.Start == nil || c.mismatch != nil { // a snagd runs: another cannot start
		return nil, discoveryError(abs, c.mismatch, notes)
	}
	exited, err := opts.Start(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("start snagd: %w", err)
	}
	deadline := time.Now().Add(ReadyWait)
	for time.Now().Before(deadline) {
		if c.tok, err = token.Read(opts.Home); err == nil {
			if found, notes = c.find(ctx, opts.Timeout); found {
				return c, c.awaitReady(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-exited:
			if c.mismatch != nil {
				return nil, discoveryError(abs, c.mismatch, notes)
			}
			return nil, noDaemon(abs, append(notes, "the snagd started for it exited"))
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil, discoveryError(abs, c.mismatch, notes)
}

// awaitReady waits for a daemon that was found still reading the task
// files at its start (it answers 503 until then).
func (c *Client) awaitReady(ctx context.Context) error {
	deadline := time.Now().Add(ReadyWait)
	for !c.health.Ready {
		if time.Now().After(deadline) {
			return fmt.Errorf("snagd on :%d has been reading the task files for %s: see .snag/snagd.log", c.health.Port, ReadyWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if h, err := c.probe(ctx, c.health.Port, time.Second); err == nil && h.PID == c.health.PID {
			c.health = *h
		}
	}
	return nil
}

// ReadyWait is how long a client waits for a daemon that is starting, and
// how long it retries requests answered 503.
var ReadyWait = 30 * time.Second

func noDaemon(root string, notes []string) error {
	var more string
	if len(notes) > 0 {
		more = " (" + strings.Join(notes, "; ") + ")"
	}
	return fmt.Errorf("%w for %s: start one with snagd --root %s%s", ErrNoDaemon, root, root, more)
}

// discoveryError is what Dial returns when no daemon it can trust serves
// the project: a snagd of the project that proved another token is the
// cause to name (starting one would fail: it runs), else no daemon.
func discoveryError(root string, mismatch *mismatchError, notes []string) error {
	if mismatch != nil {
		return fmt.Errorf("%w: %w", ErrNoDaemon, mismatch)
	}
	return noDaemon(root, notes)
}

// tokenFileName is the token file in home as messages name it: ~/.snag/token
// for the default home, else its whole path ($SNAG_HOME/token).
func tokenFileName(home string) string {
	if h, err := os.UserHomeDir(); err == nil && filepath.Clean(home) == filepath.Join(h, ".snag") {
		return "~/.snag/token"
	}
	if home == os.Getenv("SNAG_HOME") {
		return filepath.Join(home, "token") + " ($SNAG_HOME)"
	}
	return filepath.Join(home, "token")
}

func home() string {
	if h := os.Getenv("SNAG_HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return filepath.Join(h, ".snag")
}

// find looks for the daemon: the port in .snag/.port first, then every
// port of the range. A daemon of this project wins over one of another
// worktree of the same repository.
func (c *Client) find(ctx context.Context, timeout time.Duration) (bool, []string) {
	var ports []int
	if b, err := os.ReadFile(filepath.Join(c.root, ".snag", ".port")); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 && p < 65536 {
			ports = append(ports, p)
		}
	}
	for p := FirstPort; p <= LastPort; p++ {
		if len(ports) == 0 || p != ports[0] {
			ports = append(ports, p)
		}
	}
	myCommon := gitdir.Common(c.root)
	c.mismatch = nil
	var notes []string
	var sibling *Health
	for _, p := range ports {
		h, err := c.probe(ctx, p, timeout)
		if err != nil {
			var me *mismatchError
			if errors.As(err, &me) && c.mismatch == nil && (me.root == c.root || myCommon != "" && me.common == myCommon) {
				c.mismatch = me
			}
			if !errors.Is(err, errNoAnswer) {
				notes = append(notes, err.Error())
			}
			continue
		}
		switch {
		case h.Root == c.root:
			c.use(h)
			return true, nil
		case myCommon != "" && h.GitCommonDir == myCommon && sibling == nil:
			sibling = h
		default:
			notes = append(notes, fmt.Sprintf("snagd on :%d serves %s, not %s", p, h.Root, c.root))
		}
	}
	if sibling != nil {
		c.use(sibling)
		return true, nil
	}
	return false, notes
}

func (c *Client) use(h *Health) {
	c.health = *h
	c.base = "http://127.0.0.1:" + strconv.Itoa(h.Port)
}

var errNoAnswer = errors.New("no answer")

// probe asks one port for /health with a fresh nonce and checks the proof.
func (c *Client) probe(ctx context.Context, port int, timeout time.Duration) (*Health, error) {
	var n [16]byte
	rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := fmt.Sprintf("http://127.0.0.1:%d/health?nonce=%s", port, nonce)
	req, _ := http.NewRequestWithContext(pctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, errNoAnswer
	}
	defer resp.Body.Close()
	var h Health
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&h); err != nil || h.Service != "snagd" {
		return nil, errNoAnswer
	}
	if !c.tok.CheckProof(nonce, h.Proof) {
		if h.Root != "" && h.Proof != "" {
			// It may be this project's snagd with another token: say so,
			// for discovery to name the cause if no other answers. The
			// token is never sent to it either way.
			return nil, fmt.Errorf("something on :%d says it is snagd but cannot prove it holds your token: not trusted: %w",
				port, &mismatchError{port: port, root: h.Root, common: h.GitCommonDir, tokenFile: tokenFileName(c.home), path: filepath.Join(c.home, "token")})
		}
		return nil, fmt.Errorf("something on :%d says it is snagd but cannot prove it holds your token: not trusted", port)
	}
	if h.Port == 0 {
		h.Port = port
	}
	return &h, nil
}

// Health is what the daemon said when it was found.
func (c *Client) Health() Health { return c.health }

// Fresh asks the daemon's /health again and returns it.
func (c *Client) Fresh(ctx context.Context) (Health, error) {
	h, err := c.probe(ctx, c.health.Port, time.Second)
	if err != nil {
		return Health{}, err
	}
	return *h, nil
}

// Recheck asks the daemon's /health again, as clients do before every
// write; when the daemon changed (restarted, or a different one answers),
// it discovers again.
func (c *Client) Recheck(ctx context.Context) error {
	h, err := c.probe(ctx, c.health.Port, time.Second)
	if err == nil && h.PID == c.health.PID && h.Root == c.health.Root {
		return nil
	}
	if found, notes := c.find(ctx, 200*time.Millisecond); !found {
		return discoveryError(c.root, c.mismatch, notes)
	}
	return nil
}

// Error is an error answer from snagd.
type Error struct {
	Status  int    `json:"-"` // the HTTP status; an answer's own "status" field is not it
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// ErrorCode is snagd's code for the error (not_found, transition, blocked,
// ...), for a surface that words errors its own way.
func (e *Error) ErrorCode() string { return e.Code }

// Do sends a request with the token and decodes a JSON answer into out
// (when out is not nil). A non-2xx answer is returned as *Error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	return c.DoAs(ctx, 0, "", method, path, in, out)
}

// retryLater reports whether an answer asks to be sent again in a moment:
// a 503 with Retry-After.
func retryLater(resp *http.Response) bool {
	return resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != ""
}

// retryAfter is how long a 503 answer asks the client to wait, at least
// 50 ms and at most 2 s.
func retryAfter(resp *http.Response) time.Duration {
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || secs <= 0 {
		return 100 * time.Millisecond
	}
	return min(time.Duration(secs)*time.Second, 2*time.Second)
}

// StartDetached starts a daemon for root in the background, in its own
// session so it outlives the command that started it, with its log in
// .snag/snagd.log (the previous log is kept as snagd.log.1 once it passes
// 1 MiB). exe is the program and args its arguments (for example the snag
// binary with "daemon", "--root", root). The channel is closed if the
// daemon exits.
func StartDetached(exe string, args []string, root string) (<-chan struct{}, error) {
	name := filepath.Join(root, ".snag", "snagd.log")
	if fi, err := os.Stat(name); err == nil && fi.Size() > 1<<20 {
		os.Rename(name, name+".1")
	}
	logf, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(exe, args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	return exited, nil
}
