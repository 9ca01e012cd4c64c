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
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snagdev/snag/api"
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

// dial is Dial without the version handshake.
func dial(ctx context.Context, root string, opts Options) (*Client, error) {
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
	c := &Client{root: abs, home: opts.Home, tok: tok,
		waiting: opts.Waiting, waitingAfter: opts.WaitingAfter}
	c.wire.worktree = url.PathEscape(abs)
	if c.waitingAfter == 0 {
		c.waitingAfter = WaitingAfter
	}
	c.Caller = Caller{c: c}
	if opts.Quick && tokErr == nil {
		if h, ok := lockedBy(abs); ok {
			c.use(h)
			c.quick = true // before any other goroutine sees c
			return c, nil
		}
	}
	// Without a token nothing proves itself: a snagd that runs is named.
	found, notes := false, []string(nil)
	if tokErr == nil {
		found, notes = c.findLive(ctx, opts.Timeout)
	} else {
		found, notes = c.find(ctx, opts.Timeout)
	}
	if tokErr != nil && opts.Start == nil {
		if c.mismatch != nil {
			return nil, discoveryError(abs, c.mismatch, notes)
		}
		return nil, fmt.Errorf("%w: %w", ErrNoDaemon, tokErr)
	}
	if found {
		return c, c.awaitReady(ctx, opts.Waiting)
	}
	if opts.Start == nil || c.mismatch != nil { // a snagd runs: another cannot start
		return nil, discoveryError(abs, c.mismatch, notes)
	}
	exited, err := opts.Start(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("start snagd in the background: %w (run it yourself: snag daemon --root %s)", err, abs)
	}
	// Several commands started at once each start a daemon; one takes the
	// project's lock and the others exit at once. A command whose daemon
	// exited waits for the one that holds the lock, as long as one does.
	// The daemon it started may be slow to answer at all on a loaded
	// machine: it is waited for past ReadyWait as long as it lives, or
	// another holds the project's lock.
	deadline := time.Now().Add(ReadyWait)
	alive := func() bool {
		if exited != nil {
			select {
			case <-exited:
			default:
				return true
			}
		}
		return lockHeld(abs)
	}
	for time.Now().Before(deadline) || alive() {
		if c.tok, err = token.Read(opts.Home); err == nil {
			if found, notes = c.find(ctx, opts.Timeout); found {
				return c, c.awaitReady(ctx, opts.Waiting)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-exited:
			if c.mismatch != nil {
				return nil, discoveryError(abs, c.mismatch, notes)
			}
			if held, _ := LockHeld(abs); !held {
				return nil, noDaemon(abs, append(notes, "the snagd started for it exited"))
			}
			exited = nil // another command's snagd won the lock: wait for it
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil, discoveryError(abs, c.mismatch, notes)
}

// awaitReady waits for a daemon that was found still reading the task
// files at its start (it answers 503 until then). It waits as long as that
// daemon is alive and answers /health, which it does from its first moment,
// or holds the project's lock: a big project's first read takes as long as
// it takes. waiting, when set, is told once when the wait passes
// WaitingAfter.
func (c *Client) awaitReady(ctx context.Context, waiting func(Health)) error {
	start := time.Now()
	lastAnswer := start
	told := false
	pause := 20 * time.Millisecond
	for h0 := c.Health(); !h0.Ready; h0 = c.Health() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 250*time.Millisecond)
		h, err := c.probe(ctx, h0.Port, time.Second)
		switch {
		case err == nil && h.Error != "":
			return fmt.Errorf("snagd on :%d cannot serve %s: %s", h0.Port, c.root, h.Error)
		case err == nil && h.PID == h0.PID:
			c.use(h)
			lastAnswer = time.Now()
		case err == nil:
			return fmt.Errorf("snagd on :%d was replaced (pid %d, now %d) while it read the task files: run the command again", h0.Port, h0.PID, h.PID)
		case time.Since(lastAnswer) > gone && !lockHeld(h0.Root):
			return fmt.Errorf("snagd on :%d (pid %d) stopped answering while it read the task files: see .snag/snagd.log, then start it with snag daemon --root %s", h0.Port, h0.PID, c.root)
		}
		if h := c.Health(); !told && waiting != nil && time.Since(start) > c.waitingAfter && !h.Ready {
			told = true
			waiting(h)
		}
	}
	return nil
}

// lockedBy gives what the project's lock says of the snagd that serves
// root, when that is enough to send it the token without asking for a
// proof first: the lock is held (a snagd of the project is alive; the
// kernel drops the lock when it exits), its file names the pid and the
// port that snagd bound before writing it (it holds that port until it
// exits, so nothing else listens there), .port names the same port, and
// the process is this user's (who can read the token anyway). Anything
// else, or a system without /proc, is left to discovery and its proof.
func lockedBy(root string) (*Health, bool) {
	b, err := os.ReadFile(filepath.Join(root, ".snag", LockFile))
	if err != nil {
		return nil, false
	}
	fields := strings.Fields(string(b))
	if len(fields) < 2 {
		return nil, false
	}
	pidText := fields[0]
	pid, err1 := strconv.Atoi(pidText)
	port, err2 := strconv.Atoi(fields[1])
	if err1 != nil || err2 != nil || pid <= 0 || port <= 0 || port > 65535 {
		return nil, false
	}
	version := "" // a snagd that writes none is older than the version handshake
	if len(fields) > 2 {
		version = fields[2]
	}
	if ports := portsOf(root); len(ports) == 0 || ports[0] != port {
		return nil, false // .port is missing or names another port: not fresh
	}
	fi, err := os.Stat("/proc/" + pidText)
	if err != nil {
		return nil, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return nil, false
	}
	if held, known := LockHeld(root); !held || !known {
		return nil, false
	}
	return &Health{Service: "snagd", Root: root, PID: pid, Port: port, Version: version}, true
}

// unquick leaves the trust of the lock for discovery and its proof, after
// the daemon the lock named did not answer as one that is ready: it
// refused the connection or the token, or is still starting. Nothing was
// done by the request that found that out.
func (c *Client) unquick(ctx context.Context) error {
	c.findMu.Lock()
	defer c.findMu.Unlock()
	c.mu.Lock()
	was := c.quick
	c.quick = false
	c.mu.Unlock()
	if !was {
		return nil // another call did it meanwhile
	}
	found, notes := c.findLive(ctx, 200*time.Millisecond)
	if !found {
		return discoveryError(c.root, c.mismatch, notes)
	}
	return c.awaitReady(ctx, c.waiting)
}

// findLive finds the project's daemon as find does and, while a snagd holds
// the project's lock, looks again until it answers: a snagd that has bound
// its port and taken the lock may not answer for seconds on a loaded
// machine, and it is the one that will serve (another cannot start). It
// looks for ReadyWait at most: a snagd that holds the lock and answers
// nothing for that long is named in the notes. findMu must be held, and a
// token read.
func (c *Client) findLive(ctx context.Context, timeout time.Duration) (bool, []string) {
	pause := 20 * time.Millisecond
	deadline := time.Now().Add(ReadyWait)
	for {
		found, notes := c.find(ctx, timeout)
		if found || c.mismatch != nil || !lockHeld(c.root) {
			return found, notes
		}
		if time.Now().After(deadline) {
			return false, append(notes, fmt.Sprintf("a snagd holds %s but has answered nothing for %s: see .snag/snagd.log, or stop the process that holds the lock (fuser %[1]s) and run the command again",
				filepath.Join(c.root, ".snag", LockFile), ReadyWait))
		}
		select {
		case <-ctx.Done():
			return false, notes
		case <-time.After(pause):
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// gone is how long a starting daemon may leave /health unanswered before a
// client stops waiting for it, unless it still holds the project's lock (a
// daemon busy reading on a loaded machine answers late, but it lives).
const gone = 5 * time.Second

// lockHeld reports whether a snagd is known to hold root's lock.
func lockHeld(root string) bool {
	held, known := LockHeld(root)
	return held && known
}

// WaitingAfter is how long a client waits for a daemon still reading the
// task files before it calls Options.Waiting, unless Options say.
var WaitingAfter = 2 * time.Second

// ReadyWait is how long a client waits for a daemon it started to answer
// at all, and how long it retries requests answered 503.
var ReadyWait = 30 * time.Second

func noDaemon(root string, notes []string) error {
	var more string
	if len(notes) > 0 {
		more = " (" + strings.Join(notes, "; ") + ")"
	}
	return fmt.Errorf("%w for %s: start one with snag daemon --root %s%s", ErrNoDaemon, root, root, more)
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

// LockFile, in .snag/, is held (flock) by the running snagd from its first
// moment to its exit; it names the daemon's pid and, once bound, its port.
const LockFile = "snagd.lock"

// LockHeld reports whether a snagd holds the lock of the project at root:
// its repository's (in the git common folder's snag/, gitdir.State), which
// the one snagd that serves every worktree of the repository holds, or the
// project's own .snag/snagd.lock, which that snagd holds for each worktree
// it has open (and an older snagd, serving one worktree alone, held). A
// daemon takes its lock before anything else and the kernel drops it when
// the daemon exits, however it exits, so a free lock means that no snagd
// runs for root. known is false when a lock cannot tell (a file system
// without flock); a missing lock file is known to be free.
func LockHeld(root string) (held, known bool) {
	held, known = lockFileHeld(filepath.Join(gitdir.State(root), LockFile))
	if held {
		return true, true
	}
	own, ownKnown := lockFileHeld(filepath.Join(root, ".snag", LockFile))
	return own, known && ownKnown
}

// lockFileHeld reports whether a daemon holds the lock file at path.
func lockFileHeld(path string) (held, known bool) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, true
	}
	if err != nil {
		return false, false
	}
	defer f.Close()
	// A shared lock, held for an instant: a daemon starting meanwhile
	// retries its exclusive one.
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); {
	case err == nil:
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false, true
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, true
	}
	return false, false
}

// portsOf gives the ports a project's files name for its daemon: .snag/.port,
// the port in the project's lock file, and the port in its repository's
// lock file (the snagd that serves every worktree of the repository).
func portsOf(root string) []int {
	var ports []int
	add := func(s string) {
		if p, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && p > 0 && p < 65536 && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, ".snag", ".port")); err == nil {
		add(string(b))
	}
	for _, lock := range []string{filepath.Join(root, ".snag", LockFile), filepath.Join(gitdir.State(root), LockFile)} {
		if b, err := os.ReadFile(lock); err == nil {
			if f := strings.Fields(string(b)); len(f) >= 2 { // pid port [version]
				add(f[1])
			}
		}
	}
	return ports
}

// find looks for the daemon: at the ports this project's files name
// (.snag/.port, its lock, its repository's lock). One snagd serves every
// worktree of a repository, each through a view of its own: every request
// names the client's project root (api.WorktreeHeader), and a snagd that
// serves it says so in /health (Root, or Worktree for a worktree snag made
// for a task, which the main worktree's view serves). It probes the whole
// range 7654-7664 only when this project's lock is held (a daemon runs but
// did not answer on a port its files name) or cannot tell: when the lock
// is free no snagd serves the project, and other projects' daemons are
// left alone.
func (c *Client) find(ctx context.Context, timeout time.Duration) (bool, []string) {
	myCommon := gitdir.Common(c.root)
	c.mismatch = nil
	var notes []string
	tried := map[int]bool{}
	var slow []int // this project's ports where something took too long
	ask := func(p int, timeout time.Duration) bool {
		h, err := c.probe(ctx, p, timeout)
		if errors.Is(err, errSlow) {
			slow = append(slow, p)
		}
		if err != nil {
			var me *mismatchError
			if errors.As(err, &me) && c.mismatch == nil && (me.root == c.root || myCommon != "" && me.common == myCommon) {
				c.mismatch = me
			}
			if !errors.Is(err, errNoAnswer) {
				notes = append(notes, err.Error())
			}
			return false
		}
		if c.serves(h) {
			c.use(h)
			return true
		}
		if myCommon != "" && h.GitCommonDir == myCommon && h.Repository == "" {
			notes = append(notes, fmt.Sprintf("snagd on :%d (pid %d) is an older one that serves %s alone: stop it (snag daemon stop in %[3]s), and the next command starts one that serves every worktree", p, h.PID, h.Root))
		} else {
			notes = append(notes, fmt.Sprintf("snagd on :%d serves %s, not %s", p, h.Root, c.root))
		}
		return false
	}
	try := func(p int) bool {
		if tried[p] {
			return false
		}
		tried[p] = true
		return ask(p, timeout)
	}
	own := portsOf(c.root)
	for _, p := range own {
		if try(p) {
			return true, nil
		}
	}
	held, known := LockHeld(c.root)
	// A port this project's files name is asked again, with more patience,
	// when a daemon runs (a loaded machine answers late) or when something
	// there took too long: it is named if it is another project's snagd.
	again := slow
	if held {
		again = own
	}
	slow = nil
	for _, p := range again {
		if ask(p, max(timeout, 2*time.Second)) {
			return true, nil
		}
	}
	if held || !known {
		for p := FirstPort; p <= LastPort; p++ {
			if try(p) {
				return true, nil
			}
		}
	}
	return false, notes
}

// serves reports whether the snagd that answered h serves this client's
// project root.
func (c *Client) serves(h *Health) bool {
	return h.Root == c.root || h.Worktree == c.root
}

func (c *Client) use(h *Health) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.health = *h
}

// state is what the client knows of its daemon now: what it said (its
// port among it), and whether it is trusted by the lock alone.
func (c *Client) state() (h Health, quick bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health, c.quick
}

var errNoAnswer = errors.New("no answer")

// errSlow is a probe's timeout: something holds the port, and may be a
// snagd on a loaded machine.
var errSlow = fmt.Errorf("%w in time", errNoAnswer)

// probe asks one port for /health with a fresh nonce and checks the proof.
func (c *Client) probe(ctx context.Context, port int, timeout time.Duration) (*Health, error) {
	var n [16]byte
	rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.wire.roundTrip(pctx, port, &request{method: "GET", path: "/health?nonce=" + nonce})
	if err != nil {
		if pctx.Err() != nil && ctx.Err() == nil {
			return nil, errSlow
		}
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

// Error is an error answer from snagd: its HTTP status, and its body's
// code (the api.Code* constants) and message.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrorCode is snagd's code for the error (not_found, transition, blocked,
// ...), for a surface that words errors its own way.
func (e *Error) ErrorCode() string { return e.Code }

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
