package daemon

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/engine/graph"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
)

// SessionHeader names the session a request acts for.
const SessionHeader = api.SessionHeader

// personRoute serves one of snagd's own routes that only a person calls
// and that is no operation (the extension's pairing codes and
// credentials): it answers 503 until the engine is ready, refuses an
// agent's session with refusal, decodes a POST's body into T, and writes
// h's answer with its status, or its error.
func personRoute[T any](d *Daemon, refusal string, h func(ctx context.Context, body T) (int, any, error)) http.HandlerFunc {
	return d.ready503(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(SessionHeader) != "" {
			writeError(w, &apiError{Status: http.StatusForbidden, Code: "person_only", Message: refusal})
			return
		}
		var body T
		if r.Method == http.MethodPost {
			if e := decode(r, &body); e != nil {
				writeError(w, e)
				return
			}
		}
		status, out, err := h(r.Context(), body)
		if err != nil {
			writeError(w, d.answer(err))
			return
		}
		writeJSON(w, status, out)
	})
}

// statusOfKind is the HTTP status of each kind of the engine's refusals.
var statusOfKind = []struct {
	kind   error
	status int
}{
	{engine.ErrNotFound, http.StatusNotFound},
	{engine.ErrInvalid, http.StatusBadRequest},
	{engine.ErrSessionEnded, http.StatusGone},
	{engine.ErrForeign, http.StatusForbidden},
	{engine.ErrHeld, http.StatusConflict},
	{engine.ErrStale, http.StatusConflict},
	{engine.ErrTransition, http.StatusConflict},
	{engine.ErrBlocked, http.StatusConflict},
	{engine.ErrMissing, http.StatusConflict},
	{engine.ErrHolding, http.StatusConflict},
	{engine.ErrNotHeld, http.StatusConflict},
	{engine.ErrCannotVerify, http.StatusConflict},
	{engine.ErrFilesHeld, http.StatusConflict},
	{graph.ErrNotLive, http.StatusConflict},
	{engine.ErrUnreachable, http.StatusServiceUnavailable},
	{engine.ErrStarting, http.StatusServiceUnavailable},
	{engine.ErrTooLarge, http.StatusRequestEntityTooLarge},
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
	if s.ID != 0 {
		d.calls.Store(s.ID, time.Now())
	}
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
