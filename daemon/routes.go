package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/project"
	"github.com/snagdev/snag/queue"
	"github.com/snagdev/snag/watch"
)

func (d *Daemon) routes(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", d.health)
	mux.HandleFunc("GET /tasks", d.ready503(d.listTasks))
	mux.HandleFunc("GET /tasks/{ref}", d.ready503(d.getTask))
	mux.HandleFunc("POST /tasks", d.ready503(d.addTask))
	mux.HandleFunc("POST /tasks/{ref}/{action}", d.ready503(d.moveTask))
	mux.HandleFunc("GET /search", d.ready503(d.search))
	mux.HandleFunc("POST /tasks/{ref}/claim", d.ready503(d.claim))
	mux.HandleFunc("POST /claim", d.ready503(d.claim))
	mux.HandleFunc("POST /tasks/{ref}/release", d.ready503(d.release))
	mux.HandleFunc("POST /tasks/{ref}/resolve", d.ready503(d.resolve))
	mux.HandleFunc("POST /tasks/{ref}/accept", d.ready503(d.personAccept))
	mux.HandleFunc("POST /verify/{ref}", d.ready503(d.postVerify))
	mux.HandleFunc("GET /verify/{ref}", d.ready503(d.getVerify))
	mux.HandleFunc("POST /sessions", d.ready503(d.register))
	mux.HandleFunc("GET /sessions", d.ready503(d.listSessions))
	mux.HandleFunc("POST /sessions/{id}/end", d.ready503(d.endByPerson))
	mux.HandleFunc("GET /sessions/{id}/stream", d.ready503(func(w http.ResponseWriter, r *http.Request) { d.stream(ctx, w, r) }))
	mux.HandleFunc("GET /audit", d.ready503(d.auditLog))
	mux.HandleFunc("POST /reindex", d.ready503(d.reindex))
	mux.HandleFunc("POST /rescan", d.ready503(func(w http.ResponseWriter, r *http.Request) {
		// A full rescan now, as the watcher's timer would run it: for a
		// person who wants the index to have seen their latest edits.
		d.apply(r.Context(), watch.Batch{Rescan: true, Reasons: []string{"requested"}}, false)
		writeJSON(w, http.StatusOK, api.Rescanned{Done: true})
	}))
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) { d.hub.serveEvents(ctx, w, r) })
	d.mcp = d.mcpHandler(ctx)
	mux.Handle(MCPPath, d.mcp) // MCP over Streamable HTTP: POST, GET (its SSE stream), DELETE
	noOAuth := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{http.StatusNotFound, "not_found", "snagd has no OAuth: send Authorization: Bearer with the token in " + d.guard.tokenFile})
	}
	mux.HandleFunc("/.well-known/", noOAuth)
	mux.HandleFunc(MCPPath+"/.well-known/", noOAuth)
	mux.HandleFunc("/", d.mountBoard(mux))
	public := func(r *http.Request) bool { return r.URL.Path == "/health" || wellKnown(r) }
	used := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !public(r) {
			d.lastUse.Store(time.Now().UnixNano())
		}
		if tool := r.Header.Get(ToolHeader); tool != "" && r.Header.Get(SessionHeader) != "" {
			if id, err := strconv.ParseInt(r.Header.Get(SessionHeader), 10, 64); err == nil {
				d.calls.Store(id, time.Now())
			}
			d.auditTool(w, r, tool, mux)
			return
		}
		mux.ServeHTTP(w, r)
	})
	return d.guard.wrap(public, used)
}

// ready503 answers 503 with Retry-After until the first full rescan is done,
// so nothing is served from an index that may not match the files.
func (d *Daemon) ready503(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !d.ready.Load() {
			writeError(w, &apiError{http.StatusServiceUnavailable, "starting", "snagd is reading the task files: try again in a moment"})
			return
		}
		h(w, r)
	}
}

func (d *Daemon) health(w http.ResponseWriter, r *http.Request) {
	h := Health{Service: "snagd", Root: d.root, GitCommonDir: d.gitCommon, PID: os.Getpid(), Port: d.port,
		Version: d.opts.Version, Ready: d.ready.Load()}
	if d.ready.Load() {
		c, _ := d.p.DB.Count(r.Context())
		h.Counts = c.Wire()
	}
	if n := r.URL.Query().Get("nonce"); n != "" && len(n) <= 256 {
		h.Proof = d.tok.Proof(n)
	}
	writeJSON(w, http.StatusOK, h)
}

// maxList is the most tasks one GET /tasks answers; the next page follows
// from its cursor.
const maxList = 10000

func (d *Daemon) listTasks(w http.ResponseWriter, r *http.Request) {
	q := readQuery(r, "status", "wave", "kind", "plan", "all", "limit", "cursor")
	f := index.Filter{Plan: q.str("plan"), All: q.flag("all"), Cursor: q.str("cursor"),
		Wave: q.int("wave", 0, 1<<30, 0), Limit: q.int("limit", 1, maxList, 0)}
	if s := q.str("status"); s != "" {
		for _, st := range strings.Split(s, ",") {
			if !queue.Status(st).Valid() {
				q.fail("bad_status", "unknown status %q (want one of %s)", st, joinStrings(queue.Statuses))
				break
			}
			f.Statuses = append(f.Statuses, queue.Status(st))
		}
	}
	if k := q.str("kind"); k != "" {
		if !slices.Contains(queue.Kinds, queue.Kind(k)) {
			q.fail("bad_kind", "unknown kind %q (want one of %s)", k, joinStrings(queue.Kinds))
		}
		f.Kind = queue.Kind(k)
	}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	page, err := d.p.DB.List(r.Context(), f)
	if err != nil {
		d.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, taskList(page))
}

func (d *Daemon) getTask(w http.ResponseWriter, r *http.Request) {
	ref, ok := pathRef(w, r)
	if !ok {
		return
	}
	it, err := d.p.DB.Get(r.Context(), ref)
	if err != nil {
		d.fail(w, err)
		return
	}
	st, it, verr := d.verifyState(r.Context(), it) // it: the row as the runs agree with
	var v *verifyState
	if verr == nil && (st.Running || st.Outcome != "") {
		st.History = nil // GET /verify/{ref} has it
		v = &st
	}
	writeJSON(w, http.StatusOK, taskDetail(it, d.p.Rel(it.Path), v))
}

func (d *Daemon) addTask(w http.ResponseWriter, r *http.Request) {
	var req addRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	nt := project.NewTask{Title: req.Title, Body: []byte(req.Body), Wave: req.Wave, Plan: req.Plan, DependsOn: req.DependsOn}
	if req.Kind != "" {
		if !slices.Contains(queue.Kinds, queue.Kind(req.Kind)) {
			writeError(w, &apiError{http.StatusBadRequest, "bad_kind", "unknown kind " + strconv.Quote(req.Kind)})
			return
		}
		nt.Kind = queue.Kind(req.Kind)
	}
	if req.Severity != "" {
		if !slices.Contains(queue.Severities, queue.Severity(req.Severity)) {
			writeError(w, &apiError{http.StatusBadRequest, "bad_severity", "unknown severity " + strconv.Quote(req.Severity)})
			return
		}
		nt.Severity = queue.Severity(req.Severity)
	}
	for _, f := range req.Files {
		ref, err := queue.ParseFileRef(f)
		if err != nil {
			writeError(w, &apiError{http.StatusBadRequest, "bad_file", err.Error()})
			return
		}
		nt.Files = append(nt.Files, ref)
	}
	// A person's task is vetted and open; an agent's (a request with its
	// session) is unvetted and goes to the inbox until a person promotes it.
	actor, who := queue.Person, req.By
	if r.Header.Get(SessionHeader) != "" {
		s, e := d.sessionOf(r)
		if e != nil {
			writeError(w, e)
			return
		}
		actor, who = queue.Agent, s.Name
	}
	d.mu.Lock()
	t, path, err := d.p.Add(r.Context(), nt, actor, who)
	d.mu.Unlock()
	if err != nil {
		d.fail(w, err)
		return
	}
	d.writePlan(r.Context())
	d.hub.publish("task", map[string]any{"path": path, "added": true, "key": t.Key})
	writeJSON(w, http.StatusCreated, added(t, d.p.Rel(path)))
}

var personMoves = map[string]queue.Action{
	"promote": queue.ActPromote, "reject": queue.ActReject, "cancel": queue.ActCancel, "reopen": queue.ActReopen,
}

func (d *Daemon) moveTask(w http.ResponseWriter, r *http.Request) {
	ref, ok := pathRef(w, r)
	if !ok {
		return
	}
	action, ok := personMoves[r.PathValue("action")]
	if !ok {
		writeError(w, &apiError{http.StatusNotFound, "not_found", "no such move: " + r.PathValue("action")})
		return
	}
	var req moveRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	t, err := d.personMove(r.Context(), ref, action, req.By)
	if err != nil {
		d.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, moved(t))
}

// personMove makes a person's move (promote, reject, cancel, reopen): the
// API's and the board's.
func (d *Daemon) personMove(ctx context.Context, ref queue.Ref, action queue.Action, by string) (*queue.Task, error) {
	d.mu.Lock()
	t, err := d.p.Move(ctx, ref, action, queue.Person, by)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	d.writePlan(ctx)
	d.hub.publish("task", map[string]any{"key": t.Key, "status": t.Status})
	return t, nil
}

func (d *Daemon) search(w http.ResponseWriter, r *http.Request) {
	qs := readQuery(r, "q", "limit")
	q, limit := qs.str("q"), min(qs.int("limit", 0, 1<<30, 0), 100)
	if qs.err != nil {
		writeError(w, qs.err)
		return
	}
	hits, err := d.p.Search(r.Context(), q, limit)
	if err != nil {
		writeError(w, &apiError{http.StatusBadRequest, "bad_query", err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, searchResult(hits))
}

// dryRunKey holds, in a tool call's request context, whether the handler
// made a dry run (see markDryRun).
type dryRunKey struct{}

// markDryRun records that the request was a dry run, so the audit entry of
// the tool call that made it says so.
func markDryRun(r *http.Request) {
	if p, ok := r.Context().Value(dryRunKey{}).(*bool); ok {
		*p = true
	}
}

// ToolHeader names the MCP tool a request serves, for the audit log: the
// bridge sends it, with the session, on every request a tool call makes.
const ToolHeader = api.ToolHeader

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// auditTool serves a request made for an agent's tool call and records the
// call, its session and how it ended in the audit log.
func (d *Daemon) auditTool(w http.ResponseWriter, r *http.Request, tool string, h http.Handler) {
	if len(tool) > 64 {
		tool = tool[:64]
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	dry := new(bool)
	r = r.WithContext(context.WithValue(r.Context(), dryRunKey{}, dry))
	h.ServeHTTP(sw, r)
	s, e := d.sessionOf(r)
	if e != nil {
		return
	}
	outcome := "ok"
	switch {
	case sw.status >= 400:
		outcome = "error " + strconv.Itoa(sw.status)
	case *dry:
		outcome = "dry-run" // it changed nothing: not to be read as the check itself
	}
	d.audit(r.Context(), index.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "tool",
		Outcome: outcome, Detail: tool + " " + r.Method + " " + r.URL.Path})
}

// reindex rebuilds the index from the task files, as snag reindex does
// when no daemon runs; live state is kept and leases are reconciled with
// what the files now say.
func (d *Daemon) reindex(w http.ResponseWriter, r *http.Request) {
	var req moveRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx := r.Context()
	st, err := d.p.Rebuild(ctx)
	if err != nil {
		d.fail(w, err)
		return
	}
	d.reconcile(ctx, nil)
	d.audit(ctx, index.AuditEntry{Actor: queue.Person, Agent: req.By, Action: "reindex", Outcome: "ok",
		Detail: fmt.Sprintf("%d files, %d failed", st.Files, st.Failed)})
	d.hub.publish("rescan", map[string]any{"reasons": []string{"reindex"}, "files": st.Files})
	writeJSON(w, http.StatusOK, api.Reindexed{Files: st.Files, Failed: st.Failed, MS: st.Duration.Milliseconds()})
}

// pathRef reads the {ref} of a request's path, answering 400 when it is
// not a task reference.
func pathRef(w http.ResponseWriter, r *http.Request) (queue.Ref, bool) {
	ref, err := queue.ParseRef(r.PathValue("ref"))
	if err != nil {
		writeError(w, &apiError{http.StatusBadRequest, "bad_ref", err.Error()})
		return queue.Ref{}, false
	}
	return ref, true
}

// fail maps an error to its HTTP answer.
func (d *Daemon) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, index.ErrNotFound):
		writeError(w, &apiError{http.StatusNotFound, "not_found", err.Error()})
	case errors.Is(err, index.ErrAmbiguous), errors.Is(err, project.ErrNotClean):
		writeError(w, &apiError{http.StatusConflict, "not_clean", err.Error()})
	case errors.Is(err, index.ErrHeld):
		writeError(w, &apiError{http.StatusConflict, "held", err.Error()})
	case errors.Is(err, index.ErrStale), errors.Is(err, index.ErrNoLease):
		writeError(w, &apiError{http.StatusConflict, "stale", err.Error() + ": claim the task again before you write to it"})
	case errors.Is(err, queue.ErrTransition):
		writeError(w, &apiError{http.StatusConflict, "transition", err.Error()})
	case errors.Is(err, queue.ErrChanged):
		// A person's editor kept saving the file while snag wrote it:
		// nothing was changed; asking again in a moment works.
		writeError(w, &apiError{http.StatusServiceUnavailable, "changing", err.Error()})
	case retryable(err):
		// SQLite's own words (SQLITE_BUSY, database is locked) stay in the log.
		d.log.Warn("request gave up waiting for snag.db", "err", err)
		writeError(w, &apiError{http.StatusServiceUnavailable, "busy", busyMessage})
	case diskFull(err):
		d.log.Error("disk full", "err", err)
		writeError(w, &apiError{http.StatusInsufficientStorage, "disk_full", diskFullMessage})
	default:
		d.log.Error("request failed", "err", err)
		writeError(w, &apiError{http.StatusInternalServerError, "internal", err.Error()})
	}
}

func slicesContains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
