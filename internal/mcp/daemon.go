package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
)

// Link is how a [Daemon] reaches snagd: the part that differs between the
// stdio bridge (snagd over HTTP, through the client) and snagd's own /mcp
// (in process). It runs snagd's operations for the caller in the context
// (ops.CallerOf: the session and the tool call), and holds the session
// those calls act for.
type Link interface {
	// Do runs an operation (ops.Service). An error that is not an
	// *ops.Error is a failure to reach snagd.
	ops.Service
	// SetClient records the MCP client's name and version, for the
	// session it registers next.
	SetClient(name, version string)
	// Session is the id of the session the call in ctx acts for (op, by
	// name), registered (and held) when the link has none. A link that no
	// connection stands for (the sessionless protocol) answers 0 for a
	// call that names a handle (snagd reads the agent from it) or only
	// reads, and registers a new agent for a write that names none
	// (setting CallOf(ctx).Agent).
	Session(ctx context.Context, op string) (int64, error)
	// Cred names the credential the link's calls came with, for the
	// handles they make; "" where snagd reads it from the request itself.
	Cred() string
	// SessionID is the id of the link's session, or 0 when it has none;
	// it registers nothing.
	SessionID() int64
	// Ended tells the link that snagd answered that session id has
	// ended: the next Session registers another.
	Ended(id int64)
	// Watch calls on for every change snagd reports (see [Live]) until
	// ctx ends or the link is closed.
	Watch(ctx context.Context, on func(key string))
	// Notice is what every tool result should say of snagd's
	// coordination store ([Noticer]); "" while all is well.
	Notice(ctx context.Context) string
	// Close lets the session go: snagd releases its leases after the
	// grace.
	Close() error
}

// Daemon is the live backend: the tools' calls (Backend, Team, Graph)
// made as snagd's operations (package ops) over a [Link], in process or
// over HTTP, for the link's session and the tool call served. It keeps
// the epoch of every lease the session holds, so Release and Resolve take
// only the task. It is safe for concurrent use.
type Daemon struct {
	link Link

	mu     sync.Mutex
	booked int64 // the session whose leases the book holds
	leases Leases
}

// NewDaemon returns the live backend over link.
func NewDaemon(link Link) *Daemon { return &Daemon{link: link} }

// Source is "daemon": the answers are snagd's.
func (d *Daemon) Source() string { return SourceDaemon }

// SetClient records the MCP client's name and version for the session.
func (d *Daemon) SetClient(name, version string) { d.link.SetClient(name, version) }

// Start registers the session, when there is none, and holds it.
func (d *Daemon) Start(ctx context.Context) error {
	_, err := d.session(ctx, "")
	return err
}

// Close lets the session go; Watch calls return.
func (d *Daemon) Close() error { return d.link.Close() }

// Watch calls on for every change snagd reports (see [Live]).
func (d *Daemon) Watch(ctx context.Context, on func(key string)) { d.link.Watch(ctx, on) }

// Notice is what snagd says of its coordination store ([Noticer]).
func (d *Daemon) Notice(ctx context.Context) string { return d.link.Notice(ctx) }

// Holds reports whether the session holds a lease on ref.
func (d *Daemon) Holds(ref string) bool { return d.epoch(ref) != 0 }

// epoch is the epoch of the lease the session holds on ref, or 0: none
// when the session the book was kept for is no longer the link's.
func (d *Daemon) epoch(ref string) int64 {
	d.mu.Lock()
	booked := d.booked
	d.mu.Unlock()
	if booked == 0 || booked != d.link.SessionID() {
		return 0
	}
	return d.leases.Epoch(ref)
}

// session is the session the call in ctx acts for (Link.Session); a
// session other than the one the book was kept for holds none of its
// leases.
func (d *Daemon) session(ctx context.Context, op string) (int64, error) {
	id, err := d.link.Session(ctx, op)
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if id != d.booked {
		d.leases.Clear()
		d.booked = id
	}
	return id, nil
}

// call runs op for the tool call in ctx, as the link's session: once more
// in a new session when snagd answered that the session had ended. ref
// names the task for a not-found answer.
func call[Req, Ans any](ctx context.Context, d *Daemon, op ops.Op[Req, Ans], ref string, req Req) (Ans, error) {
	var zero Ans
	id, err := d.session(ctx, op.Name)
	if err != nil {
		return zero, toolErr(err, ref)
	}
	ans, err := ops.Call(d.callerCtx(ctx, id), d.link, op, req)
	if sessionEnded(err) && id != 0 {
		d.link.Ended(id)
		if id, err = d.session(ctx, op.Name); err != nil {
			return zero, toolErr(err, ref)
		}
		ans, err = ops.Call(d.callerCtx(ctx, id), d.link, op, req)
	}
	return ans, toolErr(err, ref)
}

// callerCtx is ctx acting for session id (or the handle the call names)
// and the tool call it serves.
func (d *Daemon) callerCtx(ctx context.Context, id int64) context.Context {
	c := ops.Caller{Session: id, Tool: ToolOf(ctx), Via: "mcp", Cred: d.link.Cred()}
	if call := CallOf(ctx); call != nil {
		c.Handle = call.Handle
	}
	return ops.WithCaller(ctx, c)
}

// named reports whether the call in ctx names a handle.
func named(ctx context.Context) bool {
	c := CallOf(ctx)
	return c != nil && c.Handle != ""
}

// sessionEnded reports whether err is snagd's answer that the session has
// ended (its leases were released).
func sessionEnded(err error) bool {
	var e *ops.Error
	return errors.As(err, &e) && e.Status == http.StatusGone
}

// toolErr words an operation's error for the tools: a missing task is
// ErrNotFound naming ref (snagd's words name CLI commands; the tools word
// it with their own calls), a failure to reach snagd wraps
// ErrUnreachable, and snagd's refusals keep their code.
func toolErr(err error, ref string) error {
	var e *ops.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrUnreachable):
		return err
	case !errors.As(err, &e):
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	case e.Status == http.StatusNotFound && e.Code != "no_note" && e.Code != "no_source":
		return fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	return e
}

// List lists tasks.
func (d *Daemon) List(ctx context.Context, lq ListQuery) (Page, error) {
	q := ops.ListQuery{Wave: lq.Wave, Limit: lq.Limit, Cursor: lq.Cursor, All: lq.All}
	for _, s := range lq.Statuses {
		q.Statuses = append(q.Statuses, queue.Status(s))
	}
	got, err := call(ctx, d, ops.ListTasks, "", q)
	if err != nil {
		return Page{}, err
	}
	p := Page{Next: got.Next, Rows: make([]Row, 0, len(got.Tasks))}
	for _, t := range got.Tasks {
		p.Rows = append(p.Rows, RowOf(t))
	}
	return p, nil
}

// Get reads one task.
func (d *Daemon) Get(ctx context.Context, ref string) (*Detail, error) {
	got, err := call(ctx, d, ops.GetTask, ref, ops.TaskRef{Ref: ref})
	if err != nil {
		return nil, err
	}
	det := &Detail{Row: RowOf(got.Row), Problem: ProblemOf(got.Row.State, got.Row.Error)}
	if got.Body != nil {
		det.Body = *got.Body
	}
	if v := got.Verify; v != nil {
		det.Verify = &VerifyState{Running: v.Running, Outcome: v.Outcome, Reason: v.Reason, LastAt: v.LastAt,
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

// Search runs a full-text query over tasks and notes.
func (d *Daemon) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	got, err := call(ctx, d, ops.Search, "", ops.SearchQuery{Q: query, Limit: limit})
	if err != nil {
		return nil, err
	}
	hits := make([]Hit, 0, len(got.Hits)+len(got.Notes))
	for _, h := range got.Hits {
		hits = append(hits, Hit{Row: RowOf(h.Task), Snippet: h.Snippet})
	}
	for i := range got.Notes {
		hits = append(hits, Hit{Note: &got.Notes[i]})
	}
	return hits, nil
}

// Claim leases a task, or the next ready one when ref is "", and books
// its epoch.
func (d *Daemon) Claim(ctx context.Context, ref string, force, worktree bool) (Claimed, error) {
	got, err := call(ctx, d, ops.ClaimTask, ref, ops.ClaimRequest{Ref: ref, Force: force, Worktree: worktree})
	if err != nil {
		return Claimed{}, err
	}
	if got.Task == nil {
		return Claimed{Reason: got.Reason}, nil
	}
	r := RowOf(*got.Task)
	d.leases.Hold(r.ID, r.Key, got.Epoch)
	return Claimed{Task: &r, Note: got.Note, Worktree: got.Worktree, Branch: got.Branch, Handle: got.Handle}, nil
}

// Release gives a held task back with a reason.
func (d *Daemon) Release(ctx context.Context, ref, reason string) (Moved, error) {
	ep := d.epoch(ref)
	if ep == 0 && !named(ctx) {
		return Moved{}, NotHeld(ref)
	}
	got, err := call(ctx, d, ops.Release, ref, ops.LeaseRequest{Ref: ref, Epoch: ep, Reason: reason})
	if err != nil {
		return Moved{}, err
	}
	d.leases.Forget(ref, got.Key)
	return Moved{Key: got.Key, Status: string(got.Status)}, nil
}

// Resolve hands a held task to verify: a dry run first says what will
// check it; nothing can (no_capture_url) is an error that leaves the task
// claimed; a missing browser (verify_unavailable) leaves it verifying and
// is answered with snagd's message.
func (d *Daemon) Resolve(ctx context.Context, ref, commit, note string) (Moved, error) {
	ep := d.epoch(ref)
	if ep == 0 && !named(ctx) {
		return Moved{}, NotHeld(ref)
	}
	plan, err := call(ctx, d, ops.PlanVerify, ref, ops.VerifyRequest{Ref: ref, DryRun: true, Epoch: ep})
	switch {
	case codeOf(err) == ops.VerifyUnavailable:
	case err != nil:
		return Moved{}, err
	case plan.Code == ops.VerifyNoCaptureURL:
		return Moved{}, fmt.Errorf("%s. It is yours meanwhile: tell the person it is ready for their review, or snag_release it with a reason", plan.Message)
	}
	got, err := call(ctx, d, ops.Resolve, ref, ops.VerifyRequest{Ref: ref, Epoch: ep, Commit: commit, Note: note})
	var e *ops.Error
	if errors.As(err, &e) && e.Code == ops.VerifyUnavailable {
		key := plan.Key
		if key == "" { // the dry run was refused too: it named no key
			key = ref
		}
		return Moved{Key: key, Status: string(queue.StatusVerifying), Code: e.Code, Message: e.Message, Verifier: plan.Verifier}, nil
	}
	if err != nil {
		return Moved{}, err
	}
	if got.Status == queue.StatusResolved || got.Status == queue.StatusNeedsReview {
		d.leases.Forget(ref, got.Key) // the lease ended with the move
	}
	m := Moved{Key: got.Key, Status: string(got.Status), Code: got.Code, Message: got.Message, ETA: got.ETASeconds}
	if got.Verify != nil {
		m.Verifier = got.Verify.Verifier
	}
	return m, nil
}

// Add files a task into the inbox, unvetted.
func (d *Daemon) Add(ctx context.Context, t NewTask) (Added, error) {
	got, err := call(ctx, d, ops.AddTask, "", ops.AddRequest{Title: t.Title, Body: t.Body, Kind: t.Kind, Severity: t.Severity,
		Files: t.Files, Plan: t.Plan, DependsOn: t.DependsOn})
	return Added{ID: got.ID, Key: got.Key, Path: got.Path, Status: string(got.Status), Trust: string(got.Trust)}, err
}

var (
	_ Live    = (*Daemon)(nil)
	_ Team    = (*Daemon)(nil)
	_ Graph   = (*Daemon)(nil)
	_ Noticer = (*Daemon)(nil)
)
