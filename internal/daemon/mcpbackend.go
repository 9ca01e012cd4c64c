package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/mcp"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// engineBackend is the mcp.Live of one MCP session over /mcp: it calls the
// engine in process, with no request to snagd's own API. It registers a
// snag session for the MCP client on first use (transport http), holds it
// open as a session stream would until Close (then the engine ends it
// after the grace), keeps the epoch of every lease it holds, and audits
// every tool call in the session's name, as the API does for the stdio
// bridge: each call is named by the API route that makes the same change.
// It is safe for concurrent use.
type engineBackend struct {
	d *Daemon
	e *engine.Engine

	mu      sync.Mutex
	client  string
	version string
	session index.Session
	open    bool      // the session's stream is held open
	touched time.Time // when the session was last marked seen
	closed  bool      // Close was called: no new session is registered
	leases  mcp.Leases

	life    context.Context // ends at Close: Watch returns
	endLife context.CancelFunc
}

func newEngineBackend(d *Daemon) *engineBackend {
	life, end := context.WithCancel(context.Background())
	return &engineBackend{d: d, e: d.e, life: life, endLife: end}
}

// Source is "daemon": the answers are snagd's.
func (b *engineBackend) Source() string { return mcp.SourceDaemon }

// Notice is what every tool result says while snagd cannot reach its
// coordination store (engine.CoordNotice); "" while all is well.
func (b *engineBackend) Notice(ctx context.Context) string {
	b.mu.Lock()
	id := b.session.ID
	b.mu.Unlock()
	if id == 0 {
		return ""
	}
	return b.e.CoordNotice(ctx, id)
}

// SetClient records the MCP client's name and version for the session.
func (b *engineBackend) SetClient(name, version string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.client, b.version = name, version
}

// Start registers the session, when it has none, and holds it open.
func (b *engineBackend) Start(ctx context.Context) error {
	_, err := b.sessionNow(ctx)
	return err
}

// sessionNow is the backend's live session: registered on first use, and
// again when the one it had has ended (a person ended it, say), with the
// leases of the old one forgotten.
func (b *engineBackend) sessionNow(ctx context.Context) (index.Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.session.ID != 0 {
		if _, err := b.e.Session(ctx, b.session.ID); err == nil {
			return b.session, nil
		}
		if b.open {
			b.e.StreamClosed(b.session.ID)
			b.open = false
		}
		b.session = index.Session{}
		b.leases.Clear()
	}
	if b.closed {
		return index.Session{}, &apiError{Status: http.StatusGone, Code: "session_ended", Message: "this MCP session has ended: start a new one"}
	}
	client := b.client
	if client == "" {
		client = "mcp"
	}
	s, err := b.e.Register(ctx, index.Session{Client: client, ClientVersion: b.version, PID: os.Getpid(), Transport: "http"})
	if err != nil {
		return index.Session{}, err
	}
	b.session, b.open = s, true
	b.e.StreamOpened(s.ID)
	return s, nil
}

// SessionID is the id of the snag session the backend holds, or 0.
func (b *engineBackend) SessionID() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.session.ID
}

// Close lets the session go: the engine ends it, and gives its tasks
// back, after the grace. Watch calls return.
func (b *engineBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.endLife()
	if b.open {
		b.e.StreamClosed(b.session.ID)
		b.open = false
	}
	return nil
}

// Holds reports whether the backend holds a lease on ref.
func (b *engineBackend) Holds(ref string) bool { return b.leases.Epoch(ref) != 0 }

// Watch calls on with the key of each task an event of the engine names,
// or "" when many may have changed, until ctx ends or the backend closes.
func (b *engineBackend) Watch(ctx context.Context, on func(key string)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.life, cancel)
	defer stop()
	hub := b.e.Events()
	from := hub.Last()
	for {
		events, wait, gap := hub.Since(from)
		if gap {
			on("")
		}
		for _, ev := range events {
			from = ev.ID
			if ev.Type == "session" {
				continue
			}
			on(snag.TaskOf(ev.Data))
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		}
	}
}

// call runs one engine call of a tool call, in the session, and audits it
// as the API route it stands for (method and path), with its outcome: a
// dry run that changed nothing is audited as one, not as the check itself.
func (b *engineBackend) call(ctx context.Context, method, path string, dryRun bool, f func(s index.Session) error) error {
	s, err := b.sessionNow(ctx)
	if err != nil {
		return b.mcpErr(err, path)
	}
	b.touch(ctx, s.ID)
	err = f(s)
	if tool := mcp.ToolOf(ctx); tool != "" {
		status := http.StatusOK
		if err != nil {
			status = answerOf(err).Status
		}
		route, _, _ := strings.Cut(path, "?")
		b.d.auditTool(s, tool, method+" "+route, status, dryRun)
	}
	return b.mcpErr(err, path)
}

// touch marks the session seen, as a session stream does every few
// seconds: at most once per touchEvery, on a tool call.
func (b *engineBackend) touch(ctx context.Context, id int64) {
	b.mu.Lock()
	due := time.Since(b.touched) >= touchEvery
	if due {
		b.touched = time.Now()
	}
	b.mu.Unlock()
	if due {
		b.e.Touch(ctx, id)
	}
}

// touchEvery is how often a session of /mcp is marked seen while it calls
// tools, as often as a session stream's keep-alive.
const touchEvery = 5 * time.Second

// mcpErr words an engine error as the API would answer it, with its code
// (so the tools can tell a blocked task from a transition), and a missing
// task as mcp.ErrNotFound.
func (b *engineBackend) mcpErr(err error, path string) error {
	if err == nil {
		return nil
	}
	a := answerOf(err)
	if a.Status == http.StatusNotFound {
		return fmt.Errorf("%w: %s", mcp.ErrNotFound, refIn(path))
	}
	return a
}

// refIn is the task a route's path names (/tasks/{ref}/..., /verify/{ref}).
func refIn(path string) string {
	path, _, _ = strings.Cut(path, "?")
	for _, pre := range []string{"/tasks/", "/verify/"} {
		if rest, ok := strings.CutPrefix(path, pre); ok {
			rest, _, _ = strings.Cut(rest, "/")
			if ref, err := url.PathUnescape(rest); err == nil {
				return ref
			}
			return rest
		}
	}
	return path
}

// parseRef reads a task reference a tool was given.
func parseRef(ref string) (queue.Ref, error) {
	r, err := queue.ParseRef(ref)
	if err != nil {
		return r, &engine.Error{Kind: engine.ErrInvalid, Code: "bad_ref", Message: err.Error()}
	}
	return r, nil
}

// rowOf is an index row as the tools show it.
func rowOf(r *index.Row) mcp.Row {
	return mcp.Row{Key: r.Key, ID: r.ID, Title: r.Title, Status: string(r.Status), Trust: string(r.Trust),
		Severity: string(r.Severity), Kind: string(r.Kind), Wave: r.Wave, Plan: r.Plan, Assignee: r.Assignee,
		File: r.File, BlockedBy: r.BlockedBy, Path: r.Path}
}

// List lists tasks.
func (b *engineBackend) List(ctx context.Context, lq mcp.ListQuery) (mcp.Page, error) {
	f := index.Filter{Wave: lq.Wave, Limit: min(max(lq.Limit, 0), maxList), Cursor: lq.Cursor, All: lq.All}
	for _, st := range lq.Statuses {
		f.Statuses = append(f.Statuses, queue.Status(st))
	}
	var p mcp.Page
	err := b.call(ctx, http.MethodGet, "/tasks", false, func(index.Session) error {
		for _, st := range f.Statuses {
			if !st.Valid() {
				return &engine.Error{Kind: engine.ErrInvalid, Code: "bad_status",
					Message: fmt.Sprintf("unknown status %q (want one of %s)", st, joinStrings(queue.Statuses))}
			}
		}
		page, err := b.e.List(ctx, f)
		if err != nil {
			return err
		}
		p = mcp.Page{Next: page.Next, Rows: make([]mcp.Row, 0, len(page.Rows))}
		for _, r := range page.Rows {
			p.Rows = append(p.Rows, rowOf(r))
		}
		return nil
	})
	return p, err
}

// Get reads one task.
func (b *engineBackend) Get(ctx context.Context, ref string) (*mcp.Detail, error) {
	var det *mcp.Detail
	err := b.call(ctx, http.MethodGet, "/tasks/"+url.PathEscape(ref), false, func(index.Session) error {
		r, err := parseRef(ref)
		if err != nil {
			return err
		}
		st, it, err := b.e.Verification(ctx, r)
		if err != nil {
			return err
		}
		det = &mcp.Detail{Row: rowOf(&it.Row), Problem: mcp.ProblemOf(it.State, it.Error)}
		if it.Task != nil {
			det.Body = string(it.Task.Body)
		}
		if st.Running || st.Outcome != "" {
			det.Verify = &mcp.VerifyState{Running: st.Running, Outcome: st.Outcome, Reason: st.Reason, LastAt: st.LastAt,
				Verifier: st.Verifier, Shot: st.Shot, Visual: st.Visual}
		}
		det.Fill(it.Task)
		if it.Task != nil {
			det.DependsOn = b.e.DepKeys(ctx, it.Task.DependsOn)
		}
		return nil
	})
	return det, err
}

// Search runs a full-text query.
func (b *engineBackend) Search(ctx context.Context, query string, limit int) ([]mcp.Hit, error) {
	var hits []mcp.Hit
	q := url.Values{"q": {query}, "limit": {strconv.Itoa(limit)}}
	err := b.call(ctx, http.MethodGet, "/search?"+q.Encode(), false, func(index.Session) error {
		got, err := b.e.Search(ctx, query, min(max(limit, 0), 100))
		if err != nil {
			return &engine.Error{Kind: engine.ErrInvalid, Code: "bad_query", Message: err.Error()}
		}
		hits = make([]mcp.Hit, 0, len(got))
		for i := range got {
			hits = append(hits, mcp.Hit{Row: rowOf(&got[i].Row), Snippet: got[i].Snippet})
		}
		notes, err := b.e.SearchNotes(ctx, query, max(limit, 5))
		if err != nil {
			return err
		}
		for _, n := range notesWire(notes) {
			hits = append(hits, mcp.Hit{Note: &n})
		}
		return nil
	})
	return hits, err
}

// Claim leases a task, or the next ready one when ref is "".
func (b *engineBackend) Claim(ctx context.Context, ref string, force, worktree bool) (mcp.Claimed, error) {
	path := "/claim"
	if ref != "" {
		path = "/tasks/" + url.PathEscape(ref) + "/claim"
	}
	var out mcp.Claimed
	err := b.call(ctx, http.MethodPost, path, false, func(s index.Session) error {
		var r *queue.Ref
		if ref != "" {
			rr, err := parseRef(ref)
			if err != nil {
				return err
			}
			r = &rr
		}
		got, err := b.e.ClaimWorktree(ctx, s, r, force, worktree, "")
		if err != nil {
			return err
		}
		if got.Task == nil {
			out.Reason = got.Reason
			return nil
		}
		row := rowOf(got.Task)
		out.Task, out.Worktree, out.Branch, out.Note = &row, got.Worktree, got.Branch, got.Note
		b.leases.Hold(row.ID, row.Key, got.Epoch)
		return nil
	})
	return out, err
}

// Release gives a held task back with a reason.
func (b *engineBackend) Release(ctx context.Context, ref, reason string) (mcp.Moved, error) {
	ep := b.leases.Epoch(ref)
	if ep == 0 {
		return mcp.Moved{}, mcp.NotHeld(ref)
	}
	var out mcp.Moved
	err := b.call(ctx, http.MethodPost, "/tasks/"+url.PathEscape(ref)+"/release", false, func(s index.Session) error {
		r, err := parseRef(ref)
		if err != nil {
			return err
		}
		got, err := b.e.Release(ctx, s, r, ep, reason)
		if err != nil {
			return err
		}
		out = mcp.Moved{Key: got.Key, Status: string(got.Status)}
		return nil
	})
	if err == nil {
		b.leases.Forget(ref, out.Key)
	}
	return out, err
}

// Resolve hands a held task to verify: a dry run first says what will
// check it; nothing can (no_capture_url) is an error that leaves the task
// claimed; a missing browser (verify_unavailable) leaves it verifying and
// is answered with the engine's message.
func (b *engineBackend) Resolve(ctx context.Context, ref, commit, note string) (mcp.Moved, error) {
	ep := b.leases.Epoch(ref)
	if ep == 0 {
		return mcp.Moved{}, mcp.NotHeld(ref)
	}
	r, err := parseRef(ref)
	if err != nil {
		return mcp.Moved{}, b.mcpErr(err, "/tasks/"+ref)
	}
	var plan ops.VerifyPlan
	err = b.call(ctx, http.MethodPost, "/verify/"+url.PathEscape(ref), true, func(s index.Session) error {
		plan, err = b.e.VerifyPlan(ctx, r, s.Root)
		return err
	})
	switch {
	case err != nil:
		return mcp.Moved{}, err
	case plan.Code == ops.VerifyNoCaptureURL:
		return mcp.Moved{}, fmt.Errorf("%s. It is yours meanwhile: tell the person it is ready for their review, or snag_release it with a reason", plan.Message)
	}
	var res engine.Resolution
	err = b.call(ctx, http.MethodPost, "/tasks/"+url.PathEscape(ref)+"/resolve", false, func(s index.Session) error {
		res, err = b.e.Resolve(ctx, engine.VerifyRequest{Ref: r, Session: &s, Epoch: ep, Note: note, Commit: commit})
		return err
	})
	if err != nil {
		return mcp.Moved{}, err
	}
	if res.Status == queue.StatusResolved || res.Status == queue.StatusNeedsReview {
		b.leases.Forget(ref, res.Key) // the lease ended with the move
	}
	out := mcp.Moved{Key: res.Key, Status: string(res.Status), Code: res.Code, Message: res.Message, ETA: res.ETA}
	if res.Code == ops.VerifyUnavailable {
		out.Verifier = plan.Verifier
	} else if res.Verify != nil {
		out.Verifier = res.Verify.Verifier
	}
	if res.Code == ops.VerifyOK && !res.Started {
		out.Code = "" // a check was already running: the API's answer has no code
	}
	return out, nil
}

// Add files a task into the inbox, unvetted.
func (b *engineBackend) Add(ctx context.Context, t mcp.NewTask) (mcp.Added, error) {
	var out mcp.Added
	err := b.call(ctx, http.MethodPost, "/tasks", false, func(s index.Session) error {
		nt, err := newTask(api.AddRequest{Title: t.Title, Body: t.Body, Kind: t.Kind, Severity: t.Severity, Files: t.Files,
			Plan: t.Plan, DependsOn: t.DependsOn})
		if err != nil {
			return err
		}
		got, p, err := b.e.Add(ctx, nt, queue.Agent, s.Name)
		if err != nil {
			return err
		}
		out = mcp.Added{ID: got.ID, Key: got.Key, Path: project.Rel(p), Status: string(got.Status), Trust: string(got.Trust)}
		return nil
	})
	return out, err
}

var _ mcp.Live = (*engineBackend)(nil)
