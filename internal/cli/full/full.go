// Package full is the part of the snag command line that only snagd's
// program links: snagd run in the foreground (snag daemon), the MCP bridge
// (snag mcp), the index opened in place or privately (snag doctor,
// reindex and log, and reads without a daemon) and team mode's
// coordination store on PostgreSQL (snag team). It implements [cli.Full];
// the snag program, which leaves it out to start in milliseconds, runs
// "snagd snag ARGS" for the commands that need it.
package full

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/internal/browser"
	"github.com/snagdev/snag/internal/cli"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/mcp"
	mcpremote "github.com/snagdev/snag/internal/mcp/remote"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/version"
)

// Full is [cli.Full] over snag's packages.
type Full struct{}

// New gives the full part of the command line.
func New() cli.Full { return Full{} }

// Daemon runs snagd in the foreground.
func (Full) Daemon(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return daemon.Command(ctx, args, version.String(), stdout, stderr)
}

// MCP serves the MCP bridge on o.In and o.Out, through the project's snagd
// when one answers (or o.Start starts one), else from the files.
func (Full) MCP(ctx context.Context, o cli.MCPOptions) error {
	root := o.Root
	if os.Getenv("GOGC") == "" {
		// The bridge's live heap is a few MB: the default collects every
		// few calls (docs/decisions.md, MCP bridge).
		debug.SetGCPercent(400)
	}
	log := slog.New(slog.NewTextHandler(o.Stderr, nil))
	opts := client.Options{Home: layout.Home(), Start: o.Start, Version: version.String(), Waiting: func(h client.Health) {
		log.Info("waiting for snagd to finish reading the task files", "pid", h.PID, "root", h.Root)
	}}
	cfg, _ := queue.LoadConfig(filepath.Join(root, ".snag", "config.json"))
	mo := mcp.Options{Root: root, Version: version.String(), Log: log, In: o.In, Out: o.Out, Toolsets: o.Toolsets,
		Where: mcp.GitWhere(root), Workspace: func() string { return gitdir.Workspace(root, cfg.Workspace) },
		Redial: func(ctx context.Context) (mcp.Live, error) {
			cl, err := client.Dial(ctx, root, client.Options{Home: layout.Home()})
			if err != nil {
				return nil, dialErr(err)
			}
			return mcpremote.New(cl, root, log), nil
		}}
	if cl, err := client.Dial(ctx, root, opts); err != nil {
		log.Warn("no snagd: reads come from the files; writes fail until one runs", "err", err)
		mo.DialErr = dialErr(err)
	} else {
		mo.Daemon = mcpremote.New(cl, root, log)
	}
	return mcp.Run(ctx, mo)
}

// dialErr marks a discovery error whose cause is a snagd that proves
// another token, for the MCP server to name that cause.
func dialErr(err error) error {
	if errors.Is(err, client.ErrTokenMismatch) {
		return mcp.WrongToken(err)
	}
	return err
}

// Open opens the project's index in place, or with reader a private one
// brought up to date from the files (see [project.OpenReader]).
func (Full) Open(ctx context.Context, root string, reader bool) (cli.Index, error) {
	open := project.Open
	if reader {
		open = project.OpenReader
	}
	p, err := open(ctx, root)
	if err != nil {
		return nil, err
	}
	return opened{p}, nil
}

// Coord gives team mode's coordination store (package coord).
func (Full) Coord() cli.Coord { return coordStore{} }

// coordStore is package coord as [cli.Coord].
type coordStore struct{}

func (coordStore) FindDSN(home string) (string, string, error) { return coord.FindDSN("", home) }

func (coordStore) SaveDSN(home, dsn string) (string, string, error) {
	var replaced string
	// The file is read only to say what it held; FindDSN checks its mode.
	if b, err := os.ReadFile(filepath.Join(home, coord.FileName)); err == nil {
		if old := strings.TrimSpace(string(b)); old != "" && old != dsn {
			replaced = coord.Redact(old)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	p, err := coord.SaveDSN(home, dsn)
	return p, replaced, err
}

func (coordStore) Redact(dsn string) string { return coord.Redact(dsn) }

func (coordStore) Init(ctx context.Context, dsn string) ([]int, error) { return coord.Init(ctx, dsn) }

func (coordStore) Check(ctx context.Context, dsn string) (int, error) { return coord.Check(ctx, dsn) }

func (coordStore) Status(ctx context.Context, dsn, workspace string) (cli.TeamStatus, error) {
	st, err := coord.Status(ctx, dsn, workspace)
	out := cli.TeamStatus{Workspace: st.Workspace, Store: st.Store, Schema: st.Schema, Clones: make([]cli.TeamClone, len(st.Clones)),
		Held: st.Held, Done: st.Done, Note: st.Note, Others: st.Others}
	for i, c := range st.Clones {
		out.Clones[i] = cli.TeamClone(c)
	}
	return out, err
}

// opened is an open project as [cli.Index].
type opened struct{ p *project.Project }

func (o opened) List(ctx context.Context, q api.ListQuery) (api.TaskList, int, error) {
	page, err := o.p.DB.List(ctx, index.Filter{Statuses: q.Statuses, Wave: q.Wave, Kind: q.Kind, Plan: q.Plan,
		All: q.All, Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		return api.TaskList{}, 0, err
	}
	n, err := o.p.DB.Count(ctx)
	return api.TaskList{Tasks: index.WireRows(page.Rows), Next: page.Next}, n.Tasks, err
}

func (o opened) Get(ctx context.Context, ref queue.Ref) (api.TaskDetail, error) {
	it, err := o.p.DB.Get(ctx, ref)
	if err != nil {
		return api.TaskDetail{}, err
	}
	out := it.Wire(project.Rel(it.Path))
	if it.Task != nil {
		out.DependsOn = o.p.DB.DepKeys(ctx, it.Task.DependsOn)
	}
	return out, nil
}

func (o opened) Search(ctx context.Context, query string, limit int) ([]api.Hit, error) {
	hits, err := o.p.Search(ctx, query, limit)
	return index.WireHits(hits), err
}

func (o opened) Rebuild(ctx context.Context) (api.Reindexed, error) {
	s, err := o.p.Rebuild(ctx)
	return api.Reindexed{Files: s.Files, Failed: s.Failed, MS: s.Duration.Milliseconds()}, err
}

func (o opened) Sync(ctx context.Context) error {
	_, err := o.p.Sync(ctx, false)
	return err
}

// Fix is project.Fix, with the keys it gives taken from the sequence
// snagd takes its keys from: the repository's live.db, or in team mode
// (a DSN for the repository) the workspace's, which every clone shares.
func (o opened) Fix(ctx context.Context) ([]string, error) {
	state := gitdir.State(o.p.Root)
	dsn, _, err := coord.FindDSN("", state)
	if err != nil {
		return nil, err
	}
	if dsn != "" {
		ws := gitdir.Workspace(o.p.Root, o.p.Config.Workspace)
		o.p.Keys = func(ctx context.Context, floor int) (int, error) {
			n, err := coord.NextAlias(ctx, dsn, ws, "task", int64(floor))
			if err != nil {
				return 0, fmt.Errorf("the team's sequence (the coordination store): %w: fix the store's connection (snag team status)", err)
			}
			return int(n), nil
		}
		return o.p.Fix(ctx)
	}
	live, err := coord.OpenEmbeddedDB(ctx, filepath.Join(state, coord.EmbeddedFile))
	if err != nil {
		return nil, err
	}
	defer live.Close()
	o.p.Keys = func(ctx context.Context, floor int) (int, error) {
		n, err := live.NextAlias(ctx, "task", int64(floor))
		if err != nil {
			return 0, fmt.Errorf("the repository's sequence: %w", err)
		}
		return int(n), nil
	}
	return o.p.Fix(ctx)
}

func (o opened) Doctor(ctx context.Context) ([]cli.Finding, error) {
	found, err := o.p.Doctor(ctx)
	var out []cli.Finding
	for _, f := range found {
		out = append(out, cli.Finding(f))
	}
	return out, err
}

func (o opened) Rel(path string) string { return o.p.Rel(path) }

// AuditTail and AuditLog read the log of live actions with no snagd
// running: the repository's live.db, as snagd would; in team mode (the
// team's log needs snagd) or with no live.db, this worktree's snag.db.
func (o opened) AuditTail(ctx context.Context, n int) ([]api.AuditEntry, error) {
	return o.audit(ctx, func(db *coord.EmbeddedDB) ([]coord.Entry, error) { return db.AuditTail(ctx, n) },
		func() ([]snag.AuditEntry, error) { return o.p.DB.AuditTail(ctx, n) })
}

func (o opened) AuditLog(ctx context.Context, after int64, n int) ([]api.AuditEntry, error) {
	return o.audit(ctx, func(db *coord.EmbeddedDB) ([]coord.Entry, error) { return db.AuditLog(ctx, after, n) },
		func() ([]snag.AuditEntry, error) { return o.p.DB.AuditLog(ctx, after, n) })
}

func (o opened) audit(ctx context.Context, shared func(*coord.EmbeddedDB) ([]coord.Entry, error),
	local func() ([]snag.AuditEntry, error)) ([]api.AuditEntry, error) {
	state := gitdir.State(o.p.Root)
	path := filepath.Join(state, coord.EmbeddedFile)
	if dsn, _, err := coord.FindDSN("", state); err == nil && dsn == "" {
		if _, err := os.Stat(path); err == nil {
			if db, err := coord.OpenEmbeddedDB(ctx, path); err == nil {
				defer db.Close()
				es, err := shared(db)
				root := o.p.Root
				if real, err := filepath.EvalSymlinks(root); err == nil {
					root = real
				}
				out := make([]api.AuditEntry, len(es))
				for i, c := range es {
					out[i] = api.AuditEntry{ID: c.ID, SessionID: c.Session, At: c.At, Actor: queue.Actor(c.Actor), Agent: c.Agent,
						Action: c.Action, TaskID: c.TaskID, Outcome: c.Outcome, Detail: c.Detail, Branch: c.Branch}
					if c.Root != "" && c.Root != root {
						out[i].Worktree = c.Root
					}
				}
				return out, err
			}
		}
	}
	es, err := local()
	out := make([]api.AuditEntry, len(es))
	for i, e := range es {
		out[i] = api.AuditEntry(e)
	}
	return out, err
}

func (o opened) KeyOf(ctx context.Context, id string) string { return o.p.KeyOf(ctx, id) }

func (o opened) Close() error { return o.p.Close() }

// Capture opens job's page in headless Chromium with a fresh profile and
// gives what snag capture posts: the page, its errors and failed requests,
// the anchor, the screenshot and the anchor's crop, in base64.
func (Full) Capture(ctx context.Context, job cli.CaptureJob) (api.CaptureRequest, error) {
	cfg, err := queue.LoadConfig(filepath.Join(job.Root, ".snag", "config.json"))
	if err != nil {
		return api.CaptureRequest{}, err
	}
	hosts := cfg.Browser.AllowedHosts
	if job.AllowHost {
		if u, err := url.Parse(job.URL); err == nil && u.Hostname() != "" {
			hosts = append(slices.Clip(hosts), u.Hostname())
		}
	}
	got, err := browser.Capture(ctx, browser.CaptureRequest{Chromium: cfg.Browser.Chromium, URL: job.URL, AllowedHosts: hosts,
		AnchorSelector: job.AnchorSelector, AnchorText: job.AnchorText, WaitFor: job.WaitFor,
		Viewport: browser.Viewport{Width: job.Viewport.Width, Height: job.Viewport.Height, Scale: job.Viewport.Scale},
		Settle:   time.Duration(cfg.Browser.SettleMS) * time.Millisecond, Timeout: job.Timeout})
	if u, perr := url.Parse(job.URL); errors.Is(err, browser.ErrRefused) && perr == nil && strings.Contains(err.Error(), strconv.Quote(u.Hostname())) {
		return api.CaptureRequest{}, fmt.Errorf("%w, or pass --allow-host to open it for this capture only", err)
	}
	if err != nil {
		return api.CaptureRequest{}, err
	}
	req := api.CaptureRequest{URL: got.URL, Title: got.Title, UserAgent: got.UserAgent, ConsoleErrors: got.Errors,
		Viewport:   &queue.Viewport{Width: got.Viewport.Width, Height: got.Viewport.Height, Scale: got.Viewport.Scale},
		Screenshot: base64.StdEncoding.EncodeToString(got.Screenshot), AllowHost: job.AllowHost,
		Scroll: &api.Point{X: got.ScrollX, Y: got.ScrollY}}
	if a := got.Anchor; a != nil {
		req.Anchor = &api.CaptureAnchor{Selector: a.Selector, Text: a.Text,
			Box: &queue.Box{X: a.Box.X, Y: a.Box.Y, Width: a.Box.Width, Height: a.Box.Height}}
	}
	if len(got.Crop) > 0 {
		req.Crop = base64.StdEncoding.EncodeToString(got.Crop)
	}
	for _, f := range got.FailedRequests {
		req.NetworkErrors = append(req.NetworkErrors, api.NetworkError{Method: f.Method, URL: f.URL, Status: f.Status, Error: f.Error})
	}
	return req, nil
}
