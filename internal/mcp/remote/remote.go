// Package remote is the [mcp.Backend] that talks to snagd through the
// client package: it registers the bridge's session, holds the session
// stream for the bridge's whole life, and keeps the epoch of every lease it
// holds. The mcp package knows only its interface; cli wires the two. It
// must not import index, project, cli, watch, SQLite or fsnotify.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/internal/mcp"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Daemon is the backend that talks to snagd. It registers the bridge's
// session on first use, holds the session stream for its whole life (so
// snagd releases its leases when the bridge is gone), and keeps the epoch of
// every lease it holds. It is safe for concurrent use.
type Daemon struct {
	cl  *client.Client
	log *slog.Logger

	mu      sync.Mutex
	reg     client.Registration
	session client.Session
	leases  mcp.Leases
	opened  chan struct{} // closed when the first stream opens
	cancel  context.CancelFunc
	done    chan struct{}

	life    context.Context // ends at Close: Watch returns
	endLife context.CancelFunc
}

// NewDaemon returns a backend over a connected client.
func NewDaemon(cl *client.Client, log *slog.Logger) *Daemon {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	life, end := context.WithCancel(context.Background())
	return &Daemon{cl: cl, log: log, opened: make(chan struct{}), life: life, endLife: end}
}

// SetRoot records the project root the bridge works in, for the session:
// when it is another worktree of the daemon's repository, verify commands
// run there.
func (d *Daemon) SetRoot(root string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reg.Root = root
}

// Source is "daemon".
func (d *Daemon) Source() string { return mcp.SourceDaemon }

// Notice is what snagd's last answer said of its coordination store (see
// mcp.Noticer): "" while all is well.
func (d *Daemon) Notice(context.Context) string { return d.cl.Notice() }

// SetClient records the MCP client's name and version for the session; a
// session already registered is not changed.
func (d *Daemon) SetClient(name, version string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reg.Client, d.reg.ClientVersion = name, version
}

// Session registers the bridge's session when it has none yet and starts
// holding its stream; it returns the session.
func (d *Daemon) Session(ctx context.Context) (client.Session, error) {
	d.mu.Lock()
	if d.session.ID != 0 {
		defer d.mu.Unlock()
		return d.session, nil
	}
	reg := d.reg
	reg.PID, reg.Transport = os.Getpid(), "stdio"
	if reg.Client == "" {
		reg.Client = "mcp"
	}
	if n := os.Getenv("SNAG_AGENT"); n != "" {
		reg.Name = n
	}
	s, err := d.cl.Register(ctx, reg)
	if err != nil {
		d.mu.Unlock()
		return client.Session{}, err
	}
	d.session = s
	first := d.done == nil
	if first {
		sctx, cancel := context.WithCancel(context.Background())
		d.cancel, d.done = cancel, make(chan struct{})
		go d.hold(sctx)
	}
	d.mu.Unlock()
	if first { // wait a moment for the stream, so a lease is never held without it
		select {
		case <-d.opened:
		case <-time.After(2 * time.Second):
		}
	}
	return s, nil
}

// SessionID is the id of the snag session the backend holds, or 0 before
// it has registered one.
func (d *Daemon) SessionID() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.session.ID
}

// Start registers the session (when it has none) and starts holding its
// stream.
func (d *Daemon) Start(ctx context.Context) error {
	_, err := d.Session(ctx)
	return err
}

// hold keeps the session's stream open until ctx ends: when it closes (a
// snagd restart), it finds the daemon again and reopens it within snagd's
// grace; when the session has ended, the next tool call registers again.
func (d *Daemon) hold(ctx context.Context) {
	defer close(d.done)
	var once sync.Once
	for ctx.Err() == nil {
		d.mu.Lock()
		id := d.session.ID
		d.mu.Unlock()
		if id == 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		err := d.cl.Stream(ctx, id, func() { once.Do(func() { close(d.opened) }) })
		if ctx.Err() != nil {
			return
		}
		d.log.Info("session stream closed", "session", id, "err", err)
		if client.SessionEnded(err) {
			d.mu.Lock()
			d.session = client.Session{}
			d.leases.Clear()
			d.mu.Unlock()
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if err := d.cl.Recheck(ctx); err != nil {
			d.log.Info("snagd not found again yet", "err", err)
		}
	}
}

// Close stops holding the session stream; snagd then releases the
// session's leases after its grace. Watch calls return.
func (d *Daemon) Close() error {
	d.mu.Lock()
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	d.endLife()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// Watch follows snagd's event stream and calls on with the key of each
// task an event names, or "" for a rescan, missed events, or a stream that
// opened again (changes may have been missed meanwhile). It returns when
// ctx ends or the backend is closed.
func (d *Daemon) Watch(ctx context.Context, on func(key string)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(d.life, cancel)
	defer stop()
	first := true
	for ctx.Err() == nil {
		if !first {
			on("")
		}
		first = false
		err := d.cl.Events(ctx, func(e client.Event) {
			var data ops.EventTask
			json.Unmarshal(e.Data, &data)
			switch {
			case e.Type == "session":
			case data.Key != "":
				on(data.Key)
			case data.Task != "":
				on(data.Task)
			default:
				on("")
			}
		})
		if ctx.Err() != nil {
			return
		}
		d.log.Info("event stream closed", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		d.cl.Recheck(ctx)
	}
}

// call makes one call for the tool call in ctx, as the bridge's session:
// fn makes it with the session's calls, and is made again once when the
// session had ended (after registering again) or snagd was not reached
// (after finding it again). ref names the task for a not-found answer.
func (d *Daemon) call(ctx context.Context, ref string, fn func(client.Caller) error) error {
	s, err := d.Session(ctx)
	if err != nil {
		return daemonErr(err)
	}
	tool := mcp.ToolOf(ctx)
	err = fn(d.cl.As(s.ID, tool))
	var e *client.Error
	if client.SessionEnded(err) {
		d.mu.Lock()
		if d.session.ID == s.ID {
			d.session = client.Session{}
			d.leases.Clear()
		}
		d.mu.Unlock()
		if s, err = d.Session(ctx); err != nil {
			return daemonErr(err)
		}
		err = fn(d.cl.As(s.ID, tool))
	}
	if err != nil && !errors.As(err, &e) {
		// snagd went away: find it again for the next call.
		if rerr := d.cl.Recheck(ctx); rerr == nil {
			err = fn(d.cl.As(s.ID, tool))
		}
	}
	if client.NotFound(err) && !noteMissing(err) {
		// snagd's words name CLI commands; the MCP server words it with
		// its own calls.
		return fmt.Errorf("%w: %s", mcp.ErrNotFound, ref)
	}
	return daemonErr(err)
}

// noteMissing reports whether err is snagd's refusal for a note that is
// not there, which names the note and the call that finds notes.
func noteMissing(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && (e.Code == "no_note" || e.Code == "no_source")
}

func daemonErr(err error) error {
	var e *client.Error
	if err != nil && !errors.As(err, &e) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", mcp.ErrUnreachable, err)
	}
	if errors.As(err, &e) {
		if client.NotFound(err) && !noteMissing(err) {
			return fmt.Errorf("%w: %s", mcp.ErrNotFound, e.Message)
		}
		return e // its text is snagd's message; its code stays for the caller
	}
	return err
}

// List lists tasks.
func (d *Daemon) List(ctx context.Context, lq mcp.ListQuery) (mcp.Page, error) {
	q := ops.ListQuery{Wave: lq.Wave, Limit: lq.Limit, Cursor: lq.Cursor, All: lq.All}
	for _, s := range lq.Statuses {
		q.Statuses = append(q.Statuses, queue.Status(s))
	}
	var got ops.TaskList
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.List(ctx, q); return err })
	if err != nil {
		return mcp.Page{}, err
	}
	p := mcp.Page{Next: got.Next, Rows: make([]mcp.Row, 0, len(got.Tasks))}
	for _, t := range got.Tasks {
		p.Rows = append(p.Rows, mcp.RowOf(t))
	}
	return p, nil
}

// Get reads one task.
func (d *Daemon) Get(ctx context.Context, ref string) (*mcp.Detail, error) {
	var got snag.TaskDetail
	if err := d.call(ctx, ref, func(k client.Caller) (err error) { got, err = k.Get(ctx, ref); return err }); err != nil {
		return nil, err
	}
	det := &mcp.Detail{Row: mcp.RowOf(got.Row), Problem: mcp.ProblemOf(got.Row.State, got.Row.Error)}
	if got.Body != nil {
		det.Body = *got.Body
	}
	if v := got.Verify; v != nil {
		det.Verify = &mcp.VerifyState{Running: v.Running, Outcome: v.Outcome, Reason: v.Reason, LastAt: v.LastAt,
			Verifier: v.Verifier, Shot: v.Shot, Visual: v.Visual}
	}
	if got.TaskFile != "" {
		det.Path = strings.TrimPrefix(got.TaskFile, ".snag/")
	}
	det.Fill(got.Task)
	if got.DependsOn != nil {
		det.DependsOn = got.DependsOn
	}
	return det, nil
}

// Search runs a full-text query.
func (d *Daemon) Search(ctx context.Context, query string, limit int) ([]mcp.Hit, error) {
	var got ops.SearchResult
	err := d.call(ctx, "", func(k client.Caller) (err error) {
		got, err = k.Search(ctx, ops.SearchQuery{Q: query, Limit: limit})
		return err
	})
	if err != nil {
		return nil, err
	}
	hits := make([]mcp.Hit, 0, len(got.Hits))
	for _, h := range got.Hits {
		hits = append(hits, mcp.Hit{Row: mcp.RowOf(h.Task), Snippet: h.Snippet})
	}
	for i := range got.Notes {
		hits = append(hits, mcp.Hit{Note: &got.Notes[i]})
	}
	return hits, nil
}

// Claim leases a task, or the next ready one when ref is "".
func (d *Daemon) Claim(ctx context.Context, ref string, force, worktree bool) (mcp.Claimed, error) {
	var got ops.Claim
	err := d.call(ctx, ref, func(k client.Caller) (err error) {
		got, err = k.Claim(ctx, ref, ops.ClaimRequest{Force: force, Worktree: worktree})
		return err
	})
	if err != nil {
		return mcp.Claimed{}, err
	}
	if got.Task == nil {
		return mcp.Claimed{Reason: got.Reason}, nil
	}
	r := mcp.RowOf(*got.Task)
	d.leases.Hold(r.ID, r.Key, got.Epoch)
	return mcp.Claimed{Task: &r, Note: got.Note, Worktree: got.Worktree, Branch: got.Branch}, nil
}

// Holds reports whether the bridge holds a lease on ref.
func (d *Daemon) Holds(ref string) bool { return d.leases.Epoch(ref) != 0 }

// Release gives a held task back with a reason.
func (d *Daemon) Release(ctx context.Context, ref, reason string) (mcp.Moved, error) {
	ep := d.leases.Epoch(ref)
	if ep == 0 {
		return mcp.Moved{}, mcp.NotHeld(ref)
	}
	var got ops.Released
	err := d.call(ctx, ref, func(k client.Caller) (err error) {
		got, err = k.Release(ctx, ref, ops.LeaseRequest{Epoch: ep, Reason: reason})
		return err
	})
	if err != nil {
		return mcp.Moved{}, err
	}
	d.leases.Forget(ref, got.Key)
	return mcp.Moved{Key: got.Key, Status: string(got.Status)}, nil
}

// Resolve hands a held task to verify: a dry run first says what will
// check it; nothing can (no_capture_url) is an error that leaves the task
// claimed; a missing browser (verify_unavailable) leaves it verifying and
// is answered with snagd's message.
func (d *Daemon) Resolve(ctx context.Context, ref, commit, note string) (mcp.Moved, error) {
	ep := d.leases.Epoch(ref)
	if ep == 0 {
		return mcp.Moved{}, mcp.NotHeld(ref)
	}
	var plan ops.VerifyPlan
	err := d.call(ctx, ref, func(k client.Caller) (err error) {
		plan, err = k.VerifyPlan(ctx, ref, ops.VerifyRequest{Epoch: ep})
		return err
	})
	var ce *client.Error
	switch {
	case errors.As(err, &ce) && ce.Code == api.CodeVerifyUnavailable:
	case err != nil:
		return mcp.Moved{}, err
	case plan.Code == ops.VerifyNoCaptureURL:
		return mcp.Moved{}, fmt.Errorf("%s. It is yours meanwhile: tell the person it is ready for their review, or snag_release it with a reason", plan.Message)
	}
	var got ops.Resolved
	err = d.call(ctx, ref, func(k client.Caller) (err error) {
		got, err = k.Resolve(ctx, ref, ops.VerifyRequest{Epoch: ep, Commit: commit, Note: note})
		return err
	})
	if errors.As(err, &ce) && ce.Code == api.CodeVerifyUnavailable {
		key := plan.Key
		if key == "" { // the dry run answered 503 too: its body was not decoded
			key = ref
		}
		return mcp.Moved{Key: key, Status: string(queue.StatusVerifying), Code: ce.Code, Message: ce.Message, Verifier: plan.Verifier}, nil
	}
	if err != nil {
		return mcp.Moved{}, err
	}
	if got.Status == queue.StatusResolved || got.Status == queue.StatusNeedsReview {
		d.leases.Forget(ref, got.Key) // the lease ended with the move
	}
	m := mcp.Moved{Key: got.Key, Status: string(got.Status), Code: got.Code, Message: got.Message, ETA: got.ETASeconds}
	if got.Verify != nil {
		m.Verifier = got.Verify.Verifier
	}
	return m, nil
}

// Add files a task into the inbox, unvetted.
func (d *Daemon) Add(ctx context.Context, t mcp.NewTask) (mcp.Added, error) {
	var got ops.Added
	err := d.call(ctx, "", func(k client.Caller) (err error) {
		got, err = k.Add(ctx, ops.AddRequest{Title: t.Title, Body: t.Body, Kind: t.Kind, Severity: t.Severity, Files: t.Files,
			Plan: t.Plan, DependsOn: t.DependsOn})
		return err
	})
	return mcp.Added{ID: got.ID, Key: got.Key, Path: got.Path, Status: string(got.Status), Trust: string(got.Trust)}, err
}
