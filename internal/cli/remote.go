package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/version"
)

// NoAutostartEnv, when set to anything but "" or "0", stops the CLI from
// starting snagd in the background, as --no-autostart does.
const NoAutostartEnv = "SNAG_NO_AUTOSTART"

// Where a read came from, as the JSON of list, show and search says.
const (
	fromDaemon = "daemon"
	fromFiles  = "files"
)

// remote is the project a command works on and, when one serves it, its
// snagd.
type remote struct {
	root string
	cl   *client.Client // nil: no daemon; read the files
	c    *call
}

// connect finds the project and the snagd that serves it, starting one in
// the background when none answers (unless --no-autostart). A write needs
// the daemon: without one it fails naming the fix. A read falls back to the
// files, with a note on stderr when a daemon could not be started.
func connect(ctx context.Context, c *call, write bool) (*remote, error) {
	root, err := layout.Find(c.Dir)
	if err != nil {
		return nil, err
	}
	r := &remote{root: root, c: c}
	opts := client.Options{Home: layout.Home(), Quick: true}
	// A command that waits for a daemon still reading the task files (a
	// big project's first start) waits as long as the daemon lives, and
	// says so once: after two seconds to a person at a terminal, after
	// client.ReadyWait (when it used to give up) to a script, whose stderr
	// is otherwise for errors.
	if !isTerminal(c.Stderr) {
		opts.WaitingAfter = client.ReadyWait
	}
	opts.Waiting = func(h client.Health) {
		what := "the task files"
		if n := countFiles(filepath.Join(h.Root, layout.Folder, "tasks")); n > 0 {
			what = fmt.Sprintf("%s task files", thousands(n))
		}
		fmt.Fprintf(c.Stderr, "snag: waiting for snagd (pid %d) to finish reading %s of %s\n", h.PID, what, h.Root)
	}
	auto := !c.opt.noAutostart && !envSet(NoAutostartEnv)
	if auto {
		// An older snagd is replaced by this version's (client.Options.Version).
		opts.Start, opts.Version = startDaemon, version.String()
		opts.Note = func(s string) { fmt.Fprintln(c.Stderr, "snag: note: "+s) }
	}
	cl, err := client.Dial(ctx, root, opts)
	switch {
	case err == nil:
		r.cl = cl
		return r, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case write && !auto:
		return nil, fmt.Errorf("%w\n(--no-autostart or %s is set; snag writes only through snagd)", err, NoAutostartEnv)
	case write:
		return nil, fmt.Errorf("%w%s", err, logTail(root))
	case auto:
		fmt.Fprintf(c.Stderr, "snag: note: %v%s\nsnag: note: read from the files; statuses may be stale\n", err, logTail(root))
	}
	// Reading the files opens an index: snag runs snagd's program for it,
	// which, told that no snagd answered, starts none.
	if _, err := c.full(NoAutostartEnv + "=1"); err != nil {
		return nil, err
	}
	return r, nil
}

// running finds the project and the snagd that serves it, if one does; it
// starts none.
func running(ctx context.Context, c *call) (*remote, error) {
	root, err := layout.Find(c.Dir)
	if err != nil {
		return nil, err
	}
	r := &remote{root: root, c: c}
	if cl, err := client.Dial(ctx, root, client.Options{Home: layout.Home()}); err == nil {
		r.cl = cl
	}
	return r, nil
}

// startDaemon starts snagd for root in the background, detached, logging
// to .snag/snagd.log.
func startDaemon(ctx context.Context, root string) (<-chan struct{}, error) {
	exe, err := snagd()
	if err != nil {
		return nil, fmt.Errorf("snagd %w", err)
	}
	return client.StartDetached(exe, []string{"--root", root, "--exit-idle", AutostartIdle.String()}, root)
}

// logTail gives the last lines of .snag/snagd.log, which say why a daemon
// started in the background did not come up.
func logTail(root string) string {
	b, err := os.ReadFile(filepath.Join(root, layout.Folder, "snagd.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	lines = lines[max(0, len(lines)-3):]
	return "\nthe end of .snag/snagd.log:\n  " + string(bytes.Join(lines, []byte("\n  ")))
}

// countFiles counts the names in dir, or gives 0.
func countFiles(dir string) int {
	f, err := os.Open(dir)
	if err != nil {
		return 0
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	return len(names)
}

// thousands writes n with commas: 100,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	if ff, ok := w.(flushFirst); ok {
		w = ff.Writer
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func envSet(name string) bool {
	v := os.Getenv(name)
	return v != "" && v != "0"
}

// said turns snagd's error answers into errors the CLI prints as they are:
// snagd's own sentence, which names the fix.
func said(err error) error {
	var e *client.Error
	if errors.As(err, &e) {
		if e.Code == api.CodeBadRef {
			return usagef("%s", e.Message) // a malformed reference: exit 2
		}
		return errors.New(e.Message)
	}
	return err
}

// source says where the remote's reads come from.
func (r *remote) source() string {
	if r.cl != nil {
		return fromDaemon
	}
	return fromFiles
}

// local opens the project's files with a private index brought up to date
// from them: the way to read when no daemon serves the project. It writes
// nothing into the project (see [Full.Open]).
func (r *remote) local(ctx context.Context) (Index, error) {
	f, err := r.c.full()
	if err != nil {
		return nil, err
	}
	return f.Open(ctx, r.root, true)
}

// list lists tasks, and counts every task for the message of an empty list.
func (r *remote) list(ctx context.Context, q api.ListQuery) (api.TaskList, int, error) {
	if r.cl == nil {
		p, err := r.local(ctx)
		if err != nil {
			return api.TaskList{}, 0, err
		}
		defer p.Close()
		return p.List(ctx, q)
	}
	page, err := r.cl.List(ctx, q)
	if err != nil {
		return api.TaskList{}, 0, said(err)
	}
	total := r.cl.Health().Counts.Tasks
	if len(page.Tasks) == 0 {
		if h, err := r.cl.Fresh(ctx); err == nil {
			total = h.Counts.Tasks
		}
	}
	return page, total, nil
}

// get reads one task; arg is the reference as typed.
func (r *remote) get(ctx context.Context, arg string, ref queue.Ref) (api.TaskDetail, error) {
	if r.cl == nil {
		p, err := r.local(ctx)
		if err != nil {
			return api.TaskDetail{}, err
		}
		defer p.Close()
		return p.Get(ctx, ref)
	}
	d, err := r.cl.Get(ctx, arg)
	return d, said(err)
}

// search runs a full-text query.
func (r *remote) search(ctx context.Context, query string, limit int) ([]api.Hit, error) {
	if r.cl == nil {
		p, err := r.local(ctx)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		return p.Search(ctx, query, limit)
	}
	got, err := r.cl.Search(ctx, api.SearchQuery{Q: query, Limit: limit})
	if err != nil {
		return nil, said(err)
	}
	if got.Hits == nil {
		got.Hits = []api.Hit{}
	}
	return got.Hits, nil
}
