package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
)

// ErrUnavailable is wrapped by the errors of [Find] and [Run] when there is
// no browser to verify with: none is installed, the configured one is
// missing, or it would not start.
var ErrUnavailable = errors.New("no browser to verify with: install Debian's chromium package or set browser.chromium in .snag/config.json")

// names are the programs Find looks for on PATH, in order.
var names = []string{"chromium", "chromium-browser", "google-chrome"}

// Find returns the path of the browser to run: path itself when it is set
// (a file, or a name looked up on PATH), else the first of chromium,
// chromium-browser and google-chrome on PATH. With none, the error wraps
// [ErrUnavailable].
func Find(path string) (string, error) {
	if path != "" {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("browser: find chromium: browser.chromium %q: %v: %w", path, err, ErrUnavailable)
		}
		return p, nil
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("browser: find chromium: none of %s is on PATH: %w", strings.Join(names, ", "), ErrUnavailable)
}

// scratch makes the folder Chromium gets as TMPDIR, so the files it leaves
// there when it is killed are removed with it: dir/tmp, unless that is too
// long for the Unix socket Chromium makes in it (a path is at most 107
// bytes), then a folder in /tmp. It returns "" if it can make neither, and
// Chromium uses /tmp itself.
func scratch(dir string) string {
	const room = 107 - len("/tmp/org.chromium.Chromium.XXXXXX/SingletonSocket")
	if len(dir) <= room {
		if err := os.Mkdir(dir+"/tmp", 0o700); err == nil {
			return dir + "/tmp"
		}
	}
	if tmp, err := os.MkdirTemp("/tmp", "snag-chromium-"); err == nil && len(tmp) <= room {
		return tmp
	} else if err == nil {
		os.Remove(tmp)
	}
	return ""
}

// allocatorOptions are the flags and environment Chromium runs with. The
// profile and HOME are inside dir, TMPDIR is tmp; Run removes both.
func allocatorOptions(exe, dir, tmp string, out *capped) []chromedp.ExecAllocatorOption {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(dir + "/profile"),
		chromedp.NoInheritEnv,
		chromedp.Env(env...),
		chromedp.CombinedOutput(out),
		chromedp.WindowSize(1280, 800),
	}
	for _, f := range []string{
		"headless",
		"no-sandbox", // snagd may run as root in a container; the page is the developer's own
		"disable-gpu",
		"no-first-run",
		"no-default-browser-check",
		"disable-background-networking",
		"disable-component-update",
		"disable-sync",
		"disable-quic",
		"disable-extensions",
		"disable-breakpad",
		"disable-dev-shm-usage", // /dev/shm is 64 MB in a default container
		"mute-audio",
		"hide-scrollbars",
	} {
		opts = append(opts, chromedp.Flag(f, true))
	}
	return opts
}

// reap kills every process whose command line names dir (the browser's
// helpers can outlive it), looking until it finds none a few times in a row
// or ctx ends. It reads /proc, and does nothing where there is none.
func reap(ctx context.Context, dir string) {
	quiet := 0
	for quiet < 3 {
		if killUsing(dir) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// killUsing kills the processes whose command line has an argument that
// contains dir, and returns how many it found.
func killUsing(dir string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		if p, err := os.FindProcess(pid); err == nil && p.Kill() == nil {
			n++
		}
	}
	return n
}

// removeAll removes dir, trying again while a dying helper still writes in
// it, until ctx ends.
func removeAll(ctx context.Context, dir string) error {
	for {
		err := os.RemoveAll(dir)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("browser: remove the temporary profile %s: %w (remove it by hand)", dir, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// capped keeps the first few kilobytes written to it: the browser's output,
// for the error when it will not start. It is safe for concurrent use.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write keeps what fits in 4 KiB and drops the rest.
func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := 4096 - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// String returns what was kept, trimmed.
func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.TrimSpace(c.buf.String())
}
