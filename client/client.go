// Package client finds the snagd that serves a project and talks to it: the
// snag CLI and the MCP bridge use it (DESIGN section 8).
//
// Discovery asks the ports the project's files name (.snag/.port, the
// daemon's lock) for a /health that says snagd and serves this project, or
// failing that, those of another worktree of the same git repository. It
// probes all of 127.0.0.1:7654-7664 only while the project's lock says a
// daemon runs that has not answered yet. Before the token is ever
// sent, the daemon must prove it holds the token too: /health?nonce=X
// answers an HMAC of a fresh nonce, so a squatter on the port never sees it.
// A daemon for another project is never used.
//
// Its calls (Caller: List, Get, Claim, Release, Resolve, Add, Search,
// Verify, Sessions, Audit, Events, ...) send and return the API's types
// (package api); it opens no database and writes no task file.
package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/token"
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
		"Give this process the SNAG_HOME snagd has (snag install writes it into an MCP server's env), or restart snagd with this one (snag daemon stop, then snag daemon --root %s)", e.port, e.root, tokenFile, e.root)
}

func (e *mismatchError) Unwrap() error { return ErrTokenMismatch }

// Health is snagd's answer of GET /health.
type Health = api.Health

// Client talks to one snagd. Its calls (Caller's methods) are a person's;
// As gives an agent session's.
type Client struct {
	Caller
	root string // the project root, symlinks resolved
	home string
	tok  token.Token
	// mismatch is, after find, a snagd of the project whose proof did not
	// match the token, or nil.
	mismatch *mismatchError
	health   Health
	wire     transport
	// quick is set while the client trusts the project's lock instead of
	// a proof (Options.Quick): health holds only what the lock says.
	quick bool
	// mu guards health and quick, which a rediscovery changes while
	// other calls read them; findMu lets one rediscovery run at a time.
	mu, findMu   sync.Mutex
	waiting      func(Health)
	waitingAfter time.Duration
	// notice is the CoordHeader of the last answer to an agent's request.
	notice atomic.Value // string
}

// Notice is what snagd's last answer to an agent's request said of its
// coordination store (api.CoordHeader): "" while all is well.
func (c *Client) Notice() string {
	s, _ := c.notice.Load().(string)
	return s
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
	// Waiting, when set, is called once when a daemon that was found is
	// still reading the task files two seconds later (a big project's first
	// read): the caller may say what it is waiting for.
	Waiting func(Health)
	// WaitingAfter is how long that wait lasts before Waiting is called
	// (the package's WaitingAfter when 0).
	WaitingAfter time.Duration
	// Quick skips the /health round trip when the project's files show a
	// snagd of this user that serves it (see [Client.Quick]): the first
	// request is the command's own. Health then knows only the pid, port,
	// root and version until [Client.Fresh].
	Quick bool
	// Version is the caller's own version (version.String()). With Start
	// set, a snagd found of an older version, or one too old to name its
	// version in its lock, is stopped and one of the caller's started in
	// its place: leases live in the files and snag.db, and agents'
	// sessions get the restart's grace. A snagd whose version cannot be
	// ordered against the caller's (a development build) is used, and
	// Note is told.
	Version string
	// Note, when set, is told what the caller should know but that is no
	// error (a snagd of another version).
	Note func(string)
}

// Dial finds the daemon for the project at root, replacing an older one
// when opts say (Options.Version).
func Dial(ctx context.Context, root string, opts Options) (*Client, error) {
	c, err := dial(ctx, root, opts)
	if err != nil || opts.Version == "" {
		return c, err
	}
	h := c.Health()
	older, comparable := Older(h.Version, opts.Version)
	switch {
	case older && opts.Start != nil:
		if err := c.stopOlder(ctx, h, opts.Version); err != nil {
			return nil, err
		}
		c.wire.closeIdle()
		return dial(ctx, root, opts)
	case !comparable && opts.Note != nil && h.Version != opts.Version:
		opts.Note(fmt.Sprintf("snagd (pid %d) is version %s and this snag is %s: snag daemon stop, and the next command starts this version's", h.PID, h.Version, opts.Version))
	}
	return c, nil
}

// Older reports whether the snagd version running is older than mine:
// one that names none predates the version handshake; two of the form
// vMAJOR.MINOR.PATCH (a release, git describe's vX.Y.Z-N-gHASH, a Go
// pseudo-version) compare by those numbers, a later git describe of one
// tag by its count of commits. comparable is false when the two cannot
// be ordered (a development build): then older is false.
func Older(running, mine string) (older, comparable bool) {
	switch {
	case running == mine:
		return false, true
	case running == "":
		return true, true
	}
	r, rn, ok1 := semver(running)
	m, mn, ok2 := semver(mine)
	if !ok1 || !ok2 {
		return false, false
	}
	for i := range r {
		if r[i] != m[i] {
			return r[i] < m[i], true
		}
	}
	return rn < mn, true
}

// semver reads vMAJOR.MINOR.PATCH at the start of v, and the count of
// commits git describe adds after it (-N-gHASH; 0 for none).
func semver(v string) (nums [3]int, after int, ok bool) {
	rest, found := strings.CutPrefix(v, "v")
	if !found {
		return nums, 0, false
	}
	core, suffix, _ := strings.Cut(rest, "-")
	core, _, _ = strings.Cut(core, "+")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return nums, 0, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nums, 0, false
		}
		nums[i] = n
	}
	if n, _, ok := strings.Cut(suffix, "-g"); ok {
		after, _ = strconv.Atoi(n)
	}
	return nums, after, true
}

// stopOlder stops the snagd of an older version that answered h, so that
// one of version mine starts in its place: SIGTERM, then a wait until it
// has gone and given up its lock. Only a process of this user is stopped.
func (c *Client) stopOlder(ctx context.Context, h Health, mine string) error {
	running := h.Version
	if running == "" {
		running = "one too old to name its version"
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(h.PID), &st); err != nil || int(st.Uid) != os.Getuid() {
		return fmt.Errorf("snagd (pid %d) is version %s, older than this snag (%s), and is not yours to stop: ask its owner to stop it (snag daemon stop)", h.PID, running, mine)
	}
	if err := syscall.Kill(h.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop the older snagd (pid %d, version %s): %w", h.PID, running, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		// Its lock goes when it exits (a zombie's too: its files are closed).
		if !lockHeld(c.root) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the older snagd (pid %d, version %s) is still running 15 s after SIGTERM: kill %d, then run the command again", h.PID, running, h.PID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitingAfter is how long a client waits for a daemon still reading the
// task files before it calls Options.Waiting, unless Options say.
var WaitingAfter = 2 * time.Second

// ReadyWait is how long a client waits for a daemon it started to answer
// at all, and how long it retries requests answered 503.
var ReadyWait = 30 * time.Second

// Health is what the daemon said when it was found.
func (c *Client) Health() Health {
	h, _ := c.state()
	return h
}

// Fresh asks the daemon's /health again and returns it.
func (c *Client) Fresh(ctx context.Context) (Health, error) {
	was, quick := c.state()
	h, err := c.probe(ctx, was.Port, time.Second)
	if err != nil {
		return Health{}, err
	}
	if quick {
		// What the lock said is confirmed, or discovery starts over.
		if h.PID != was.PID || !c.serves(h) {
			if err := c.unquick(ctx); err != nil {
				return Health{}, err
			}
			return c.Health(), nil
		}
		c.mu.Lock()
		c.quick = false
		c.mu.Unlock()
	}
	return *h, nil
}

// Recheck asks the daemon's /health again, as clients do before every
// write; when the daemon changed (restarted, or a different one answers),
// it discovers again.
func (c *Client) Recheck(ctx context.Context) error {
	was := c.Health()
	h, err := c.probe(ctx, was.Port, time.Second)
	if err == nil && h.PID == was.PID && c.serves(h) {
		return nil
	}
	c.findMu.Lock()
	defer c.findMu.Unlock()
	if found, notes := c.findLive(ctx, 200*time.Millisecond); !found {
		return discoveryError(c.root, c.mismatch, notes)
	}
	return nil
}

// Error is snagd's answer to a request that failed: the HTTP status, its
// code (not_found, transition, blocked ...) and a message that names the
// fix. It is the operations' error (ops.Error), whatever surface asks.
type Error = ops.Error

// retryLater reports whether an answer asks to be sent again in a moment:
// a 503 with Retry-After.
func retryLater(resp *response) bool {
	return resp.StatusCode == statusUnavailable && resp.Header("Retry-After") != ""
}

// retryAfter is how long a 503 answer asks the client to wait, at least
// 50 ms and at most 2 s.
func retryAfter(resp *response) time.Duration {
	secs, err := strconv.Atoi(resp.Header("Retry-After"))
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
