package daemon

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
)

// SessionHeader names the session a request acts for.
const SessionHeader = api.SessionHeader

// call is what a handler of the API is given: its request, the JSON body
// decoded into T, the task its path names (for routes with {ref}) and the
// session it acts for (nil: a person's request).
type call[T any] struct {
	r       *http.Request
	body    T
	ref     queue.Ref
	session *index.Session
	// dryRun, set by the handler, says its answer changed nothing: the
	// audit entry of a tool call that made it says so.
	dryRun bool
}

// caller says whose requests a route takes.
type caller int

const (
	anyone caller = iota // a person's or an agent's: the session, when sent, is read
	agent                // an agent's: the session is required
	person               // a person's: a request with a session is refused
)

// route is how an API route reads its request before its handler runs.
type route struct {
	ref    bool   // the path has {ref}
	caller caller // whose requests it takes
	// refusal is what a request from the wrong caller is told.
	refusal string
}

// answer is a handler's result: an HTTP status and a JSON body.
type answer struct {
	status int
	body   any
}

func ok(body any) answer { return answer{http.StatusOK, body} }

// handle is the one adapter between HTTP and the engine: it answers 503
// until the engine is ready, reads the session, the body and the path's
// ref as rt says (answering the errors of each), calls h, and writes its
// answer, or its error through fail. A request the stdio bridge made for
// an agent's tool call (ToolHeader, with the session) is audited as that
// call, with how it ended.
func handle[T any](d *Daemon, rt route, h func(ctx context.Context, c *call[T]) (answer, error)) http.HandlerFunc {
	return d.ready503(func(w http.ResponseWriter, r *http.Request) {
		c := &call[T]{r: r}
		sent := r.Header.Get(SessionHeader) != ""
		switch {
		case rt.caller == person && sent:
			writeError(w, &apiError{Status: http.StatusForbidden, Code: "person_only", Message: rt.refusal})
			return
		case rt.caller == agent && !sent:
			msg := rt.refusal
			if msg == "" {
				msg = "send " + SessionHeader + " with the id POST /sessions gave you"
			}
			writeError(w, &apiError{Status: http.StatusBadRequest, Code: "no_session", Message: msg})
			return
		case sent:
			s, e := d.sessionOf(r)
			if e != nil {
				writeError(w, e)
				return
			}
			c.session = &s
		}
		if r.Method == http.MethodPost {
			if e := decode(r, &c.body); e != nil {
				writeError(w, e)
				return
			}
		}
		if rt.ref {
			ref, err := queue.ParseRef(r.PathValue("ref"))
			if err != nil {
				writeError(w, &apiError{Status: http.StatusBadRequest, Code: "bad_ref", Message: err.Error()})
				return
			}
			c.ref = ref
		}
		a, err := h(r.Context(), c)
		// While the coordination store is out of reach, every answer to an
		// agent says so (engine.CoordNotice), and so does any answer that
		// failed for it: a client then says so at once instead of sending
		// the request again until it gives up.
		notice := ""
		if c.session != nil {
			notice = d.e.CoordNotice(r.Context(), c.session.ID)
		}
		if notice == "" && errors.Is(err, engine.ErrUnreachable) {
			notice = err.Error()
		}
		if notice != "" {
			w.Header().Set(api.CoordHeader, notice)
		}
		if tool := r.Header.Get(ToolHeader); tool != "" && c.session != nil {
			status := a.status
			if err != nil {
				status = answerOf(err).Status
			}
			d.auditTool(*c.session, tool, r.Method+" "+r.URL.Path, status, c.dryRun)
		}
		if err != nil {
			d.fail(w, err)
			return
		}
		writeJSON(w, a.status, a.body)
	})
}

// sessionOf reads the session a request acts for.
func (d *Daemon) sessionOf(r *http.Request) (index.Session, *apiError) {
	id, err := strconv.ParseInt(r.Header.Get(SessionHeader), 10, 64)
	if err != nil {
		return index.Session{}, &apiError{Status: http.StatusBadRequest, Code: "no_session", Message: "send " + SessionHeader + " with the id POST /sessions gave you"}
	}
	s, err := d.e.Session(r.Context(), id)
	if err != nil {
		return index.Session{}, &apiError{Status: http.StatusGone, Code: "session_ended", Message: err.Error()}
	}
	return s, nil
}

// statusOfKind is the HTTP status of each kind of the engine's refusals.
var statusOfKind = []struct {
	kind   error
	status int
}{
	{engine.ErrNotFound, http.StatusNotFound},
	{engine.ErrInvalid, http.StatusBadRequest},
	{engine.ErrSessionEnded, http.StatusGone},
	{engine.ErrHeld, http.StatusConflict},
	{engine.ErrStale, http.StatusConflict},
	{engine.ErrTransition, http.StatusConflict},
	{engine.ErrBlocked, http.StatusConflict},
	{engine.ErrMissing, http.StatusConflict},
	{engine.ErrHolding, http.StatusConflict},
	{engine.ErrNotHeld, http.StatusConflict},
	{engine.ErrCannotVerify, http.StatusConflict},
	{engine.ErrFilesHeld, http.StatusConflict},
	{engine.ErrNotLive, http.StatusConflict},
	{engine.ErrUnreachable, http.StatusServiceUnavailable},
	{engine.ErrStarting, http.StatusServiceUnavailable},
	{engine.ErrTooLarge, http.StatusRequestEntityTooLarge},
}

// fail writes the HTTP answer of an error (see answerOf).
func (d *Daemon) fail(w http.ResponseWriter, err error) {
	a := answerOf(err)
	switch {
	case a.Code == "busy":
		// SQLite's own words (SQLITE_BUSY, database is locked) stay in the log.
		d.log.Warn("request gave up waiting for snag.db", "err", err)
	case a.Code == "disk_full":
		d.log.Error("disk full", "err", err)
	case a.Status == http.StatusInternalServerError:
		d.log.Error("request failed", "err", err)
	}
	writeError(w, a)
}

// answerOf is the API's answer to an error: an engine refusal by its kind
// and code, the sentinels of the index and the codec by what they mean,
// and anything else as snagd's own failure. /mcp's in-process backend
// words its errors the same way.
func answerOf(err error) *apiError {
	var a *apiError
	if errors.As(err, &a) {
		return a
	}
	var refusal *engine.Error
	if errors.As(err, &refusal) {
		for _, k := range statusOfKind {
			if errors.Is(refusal.Kind, k.kind) {
				return &apiError{Status: k.status, Code: refusal.Code, Message: refusal.Message}
			}
		}
	}
	switch {
	case errors.Is(err, index.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	case errors.Is(err, index.ErrAmbiguous), errors.Is(err, engine.ErrNotClean):
		return &apiError{Status: http.StatusConflict, Code: "not_clean", Message: err.Error()}
	case errors.Is(err, index.ErrHeld):
		return &apiError{Status: http.StatusConflict, Code: "held", Message: err.Error()}
	case errors.Is(err, index.ErrStale), errors.Is(err, index.ErrNoLease):
		return &apiError{Status: http.StatusConflict, Code: "stale", Message: err.Error() + ": claim the task again before you write to it"}
	case errors.Is(err, queue.ErrTransition):
		return &apiError{Status: http.StatusConflict, Code: "transition", Message: err.Error()}
	case errors.Is(err, taskfs.ErrChanged):
		// A person's editor kept saving the file while snag wrote it:
		// nothing was changed; asking again in a moment works.
		return &apiError{Status: http.StatusServiceUnavailable, Code: "changing", Message: err.Error()}
	case retryable(err):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "busy", Message: busyMessage}
	case diskFull(err):
		return &apiError{Status: http.StatusInsufficientStorage, Code: "disk_full", Message: diskFullMessage}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}

// auditTool records an agent's tool call in the audit log: the session it
// came in, the tool, the API route that served it, and how it ended (a
// dry run changed nothing: it is not to be read as the check itself). The
// line is written after the answer has gone (engine.AuditCall).
func (d *Daemon) auditTool(s index.Session, tool, route string, status int, dryRun bool) {
	d.calls.Store(s.ID, time.Now())
	if len(tool) > 64 {
		tool = tool[:64]
	}
	outcome := "ok"
	switch {
	case status >= 400:
		outcome = "error " + strconv.Itoa(status)
	case dryRun:
		outcome = "dry-run"
	}
	d.e.AuditCall(snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "tool",
		Outcome: outcome, Detail: tool + " " + route})
}
