package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

// Full is the part of the command line that only snagd's program links:
// snagd itself, the MCP bridge, the index opened in place (SQLite) and
// team mode's coordination store (PostgreSQL).
// The snag program leaves it out so that the commands a person runs all
// day start in a few milliseconds; a command that needs it runs snagd's
// program with the same arguments ("snagd snag ARGS", see [SnagdArg]),
// which passes it in [Env]. Package cli/full implements it.
type Full interface {
	// Daemon runs snagd in the foreground with snagd's own arguments.
	Daemon(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// MCP serves the MCP bridge for the project at root on in and out.
	MCP(ctx context.Context, o MCPOptions) error
	// Open opens the project's index: in place (snag.db, for reindex,
	// doctor and log), or with reader set, a private one brought up to
	// date from the files, which writes nothing into the project.
	Open(ctx context.Context, root string, reader bool) (Index, error)
	// Coord gives team mode's coordination store, for snag team.
	Coord() Coord
	// Capture opens a page in headless Chromium, as the browser verifier
	// does, and gives what snag capture sends to snagd: the page, its
	// errors, the anchor, the screenshot and the anchor's crop.
	Capture(ctx context.Context, job CaptureJob) (api.CaptureRequest, error)
}

// CaptureJob is what snag capture asks [Full.Capture] to capture.
type CaptureJob struct {
	// Root is the project's root: its config.json says which browser and
	// which hosts.
	Root string
	URL  string
	// AnchorSelector or AnchorText names the element to point at.
	AnchorSelector, AnchorText string
	// WaitFor is a CSS selector the page must show before it counts as
	// settled.
	WaitFor string
	// Viewport is the window; zero is 1280 by 800 at scale 1.
	Viewport queue.Viewport
	// AllowHost lets the URL's host be opened though it is not on
	// browser.allowed_hosts.
	AllowHost bool
	// Timeout bounds the capture; zero is 30 s.
	Timeout time.Duration
}

// MCPOptions is what [Full.MCP] serves with.
type MCPOptions struct {
	Root   string
	In     io.Reader
	Out    io.Writer
	Stderr io.Writer
	// Toolsets are the MCP toolsets to serve (queue, team).
	Toolsets []string
	// Start, when set, starts snagd in the background when none answers.
	Start func(ctx context.Context, root string) (<-chan struct{}, error)
}

// Index is a project's index opened by [Full.Open], in the API's types.
type Index interface {
	// List lists tasks, and counts every task.
	List(ctx context.Context, q api.ListQuery) (api.TaskList, int, error)
	// Get reads one task.
	Get(ctx context.Context, ref queue.Ref) (api.TaskDetail, error)
	// Search runs a full-text query.
	Search(ctx context.Context, query string, limit int) ([]api.Hit, error)
	// Rebuild rebuilds the index from the task files.
	Rebuild(ctx context.Context) (api.Reindexed, error)
	// Sync brings the index in step with the files.
	Sync(ctx context.Context) error
	// Fix fixes what doctor --fix fixes and says what it did.
	Fix(ctx context.Context) ([]string, error)
	// Doctor checks the project.
	Doctor(ctx context.Context) ([]Finding, error)
	// Rel gives a path inside .snag/ as a person sees it from the root.
	Rel(path string) string
	// AuditTail gives the latest n entries of the audit log, oldest first.
	AuditTail(ctx context.Context, n int) ([]api.AuditEntry, error)
	// AuditLog gives at most n entries after the one with id after.
	AuditLog(ctx context.Context, after int64, n int) ([]api.AuditEntry, error)
	// KeyOf gives the alias of the task with the id, or "".
	KeyOf(ctx context.Context, id string) string
	// Close closes the index.
	Close() error
}

// Finding is one problem snag doctor found.
type Finding struct {
	Path    string `json:"path"`             // relative to .snag/
	Kind    string `json:"kind"`             // invalid | conflict | name | duplicate | dangling | cycle | temp
	Message string `json:"message"`          // what is wrong and the fix
	Fixable bool   `json:"fixable,omitzero"` // snag doctor --fix can fix it
}

// SnagdArg, as snagd's first argument, makes snagd's program run the snag
// command line that follows it, with [Full]: "snagd snag doctor".
const SnagdArg = "snag"

// SnagdEnv, when set, is the snagd program snag runs, instead of the one
// beside snag or on PATH.
const SnagdEnv = "SNAGD"

// full gives the full part of the command line: the Env's, or, in the snag
// program, which has none, it runs snagd's program with this command line
// in place of this process (nothing of this one's has been printed yet;
// what it wrote to stdout is flushed first). env adds variables for it.
func (c *call) full(env ...string) (Full, error) {
	if c.Full != nil {
		return c.Full, nil
	}
	exe, err := snagd()
	if err != nil {
		return nil, fmt.Errorf("snag %s needs snagd, which %w", c.cmd.name, err)
	}
	return nil, c.exec(exe, append([]string{filepath.Base(exe), SnagdArg}, c.argv...), env)
}

// exec replaces this process with exe; it returns only when it cannot.
func (c *call) exec(exe string, argv, env []string) error {
	if err := flush(c.Stdout); err != nil {
		return err
	}
	flush(c.Stderr)
	if c.Dir != "" {
		if wd, err := os.Getwd(); err != nil || wd != c.Dir {
			if err := os.Chdir(c.Dir); err != nil {
				return err
			}
		}
	}
	err := syscall.Exec(exe, argv, append(os.Environ(), env...))
	return fmt.Errorf("run %s: %w", exe, err)
}

// unbuffered is Stdout unbuffered, for a command that streams its output.
func (e Env) unbuffered() io.Writer {
	if e.out != nil {
		return e.out
	}
	return e.Stdout
}

// flush writes out w's buffered output, if it buffers.
func flush(w io.Writer) error {
	if f, ok := w.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// errNoSnagd is the end of the sentence when snagd's program is not found.
var errNoSnagd = errors.New("was found neither beside snag nor on PATH: CGO_ENABLED=0 go install ./cmd/... (or make build) installs both, snag and snagd")

// snagd finds snagd's program: $SNAGD, then beside this program (under the
// name it was started by, then its resolved path), then on PATH.
func snagd() (string, error) {
	if p := os.Getenv(SnagdEnv); p != "" {
		return p, nil
	}
	var dirs []string
	if me, err := self(); err == nil {
		dirs = append(dirs, filepath.Dir(me))
	}
	if me, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(me))
		if real, err := filepath.EvalSymlinks(me); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "snagd")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("snagd"); err == nil {
		return filepath.Abs(p)
	}
	return "", errNoSnagd
}

// self is the path of the running snag program. It prefers the name it was
// started by (found on PATH when it has no slash), so that snagd is looked
// for beside the snag a person ran, not where a symlink to it points.
func self() (string, error) {
	if name := os.Args[0]; name != "" {
		if strings.ContainsRune(name, filepath.Separator) {
			if abs, err := filepath.Abs(name); err == nil {
				return abs, nil
			}
		} else if p, err := exec.LookPath(name); err == nil {
			return filepath.Abs(p)
		}
	}
	return os.Executable()
}

// AutostartIdle is how long a snagd the CLI started in the background stays
// up with no agent connected and no request.
var AutostartIdle = time.Hour
