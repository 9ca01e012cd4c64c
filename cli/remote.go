package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/project"
	"github.com/snagdev/snag/queue"
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
}

// connect finds the project and the snagd that serves it, starting one in
// the background when none answers (unless --no-autostart). A write needs
// the daemon: without one it fails naming the fix. A read falls back to the
// files, with a note on stderr when a daemon could not be started.
func connect(ctx context.Context, c *call, write bool) (*remote, error) {
	root, err := project.Find(c.Dir)
	if err != nil {
		return nil, err
	}
	r := &remote{root: root}
	opts := client.Options{Home: project.Home()}
	if isTerminal(c.Stderr) {
		// A person waiting at a terminal is told why; a script's stderr
		// stays for errors.
		opts.Waiting = func(h client.Health) {
			fmt.Fprintf(c.Stderr, "snag: waiting for snagd (pid %d) to finish reading the task files of %s\n", h.PID, h.Root)
		}
	}
	auto := !c.opt.noAutostart && !envSet(NoAutostartEnv)
	if auto {
		opts.Start = startDaemon
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
	return r, nil
}

// running finds the project and the snagd that serves it, if one does; it
// starts none.
func running(ctx context.Context, c *call) (*remote, error) {
	root, err := project.Find(c.Dir)
	if err != nil {
		return nil, err
	}
	r := &remote{root: root}
	if cl, err := client.Dial(ctx, root, client.Options{Home: project.Home()}); err == nil {
		r.cl = cl
	}
	return r, nil
}

// AutostartIdle is how long a snagd the CLI started in the background stays
// up with no agent connected and no request.
var AutostartIdle = time.Hour

// startDaemon starts snagd for root in the background: this same program
// as "snag daemon", detached, logging to .snag/snagd.log.
func startDaemon(ctx context.Context, root string) (<-chan struct{}, error) {
	exe, err := self()
	if err != nil {
		return nil, err
	}
	return client.StartDetached(exe, []string{"daemon", "--root", root, "--exit-idle", AutostartIdle.String()}, root)
}

// self is the path of the running snag program. It prefers the name it was
// started by (found on PATH when it has no slash), so a program that
// answers to several names is started under the same one.
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

// logTail gives the last lines of .snag/snagd.log, which say why a daemon
// started in the background did not come up.
func logTail(root string) string {
	b, err := os.ReadFile(filepath.Join(root, project.Folder, "snagd.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	lines = lines[max(0, len(lines)-3):]
	return "\nthe end of .snag/snagd.log:\n  " + string(bytes.Join(lines, []byte("\n  ")))
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
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
// nothing into the project (see [project.OpenReader]).
func (r *remote) local(ctx context.Context) (*project.Project, error) {
	return project.OpenReader(ctx, r.root)
}

// list lists tasks, and counts every task for the message of an empty list.
func (r *remote) list(ctx context.Context, q api.ListQuery) (api.TaskList, int, error) {
	if r.cl == nil {
		p, err := r.local(ctx)
		if err != nil {
			return api.TaskList{}, 0, err
		}
		defer p.Close()
		page, err := p.DB.List(ctx, index.Filter{Statuses: q.Statuses, Wave: q.Wave, Kind: q.Kind, Plan: q.Plan,
			All: q.All, Limit: q.Limit, Cursor: q.Cursor})
		if err != nil {
			return api.TaskList{}, 0, err
		}
		n, err := p.DB.Count(ctx)
		return api.TaskList{Tasks: index.WireRows(page.Rows), Next: page.Next}, n.Tasks, err
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
		it, err := p.DB.Get(ctx, ref)
		if err != nil {
			return api.TaskDetail{}, err
		}
		return it.Wire(project.Rel(it.Path)), nil
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
		hits, err := p.Search(ctx, query, limit)
		return index.WireHits(hits), err
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
