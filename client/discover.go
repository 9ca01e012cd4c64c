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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/token"
)

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
