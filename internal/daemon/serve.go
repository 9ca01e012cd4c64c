package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
)

// service is snagd's operations in process (ops.Service): the one place
// an operation is admitted (who may call it, the caller's session), run,
// audited as the tool call it serves, and its error worded. HTTP's routes
// (serveOps), /mcp's tools and the board all call it.
type service struct {
	d      *Daemon
	hs     ops.Handlers
	routes map[string][]api.Route // by operation
}

// refusals are what a caller of the wrong kind is told, by operation.
var refusals = map[string]string{
	ops.Resolve.Name:           resolveRefusal,
	ops.Accept.Name:            acceptRefusal,
	ops.Edit.Name:              "a person edits a task's fields (snag edit): an agent adds what it found to the inbox",
	ops.Move.Name:              "a person promotes, rejects, cancels or reopens a task (snag promote, reject, cancel, reopen): an agent adds what it found to the inbox",
	ops.EndSession.Name:        endRefusal,
	ops.ForceReleaseFiles.Name: "an agent frees only its own claims: snag_files {\"action\": \"release\"}",
	ops.PruneWorktrees.Name:    "a person prunes worktrees: snag worktrees prune",
}

func newService(d *Daemon) *service {
	s := &service{d: d, hs: ops.Handlers{}, routes: map[string][]api.Route{}}
	for _, r := range api.Routes {
		if r.Op != "" {
			s.routes[r.Op] = append(s.routes[r.Op], r)
		}
	}
	d.taskOps(s.hs)
	d.sessionOps(s.hs)
	d.teamOps(s.hs)
	d.graphOps(s.hs)
	return s
}

type sessionKey struct{}

// sessionIn is the session an operation acts for, or nil for a person's.
func sessionIn(ctx context.Context) *index.Session {
	s, _ := ctx.Value(sessionKey{}).(*index.Session)
	return s
}

// Do runs one operation for the caller ctx names (ops.CallerOf).
func (s *service) Do(ctx context.Context, op string, req any) (any, error) {
	h, ok := s.hs[op]
	if !ok {
		return nil, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "snagd has no operation " + strconv.Quote(op) + ": it may be older than this client"}
	}
	if !s.d.e.Ready() {
		return nil, errStarting
	}
	ctx, c, sess, err := s.admit(ctx, op, ops.CallerOf(ctx))
	if err != nil {
		if c.Tool != "" && c.Handle != "" {
			// A refused handle (stale, foreign) is a tool call too.
			who := index.Session{Name: sessionless}
			if got, err := s.d.e.Session(ctx, c.Session); c.Session != 0 && err == nil {
				who = got
			}
			s.d.auditTool(who, c.Tool, op, answerOf(err).Status, false)
		}
		return nil, err
	}
	if sess != nil {
		ctx = context.WithValue(ctx, sessionKey{}, sess)
	}
	ans, err := h(ctx, req)
	var a *apiError
	if err != nil {
		a = s.d.answer(err)
	}
	if c.Tool != "" && (sess != nil || c.Via == "mcp") {
		status := http.StatusOK
		if st, ok := ans.(ops.Statused); ok && a == nil {
			status, _ = st.AnswerStatus(status) // a dry run that finds no browser is a 503
		}
		if a != nil {
			status = a.Status
		}
		detail := op
		if t := ops.Target(req); t != "" {
			detail += " " + t
		}
		who := index.Session{Name: sessionless} // a read of the sessionless protocol acts for no agent
		if sess != nil {
			who = *sess
		}
		s.d.auditTool(who, c.Tool, detail, status, op == ops.PlanVerify.Name)
	}
	if a != nil {
		return nil, a
	}
	return ans, nil
}

// sessionless is the agent the audit log names for a tool call of the
// sessionless protocol that read without an agent.
const sessionless = "(sessionless)"

// admit reads the handle the caller names (admitHandle: it may stand for
// the caller's agent), checks that the caller may run op (who) and reads
// the caller's session.
func (s *service) admit(ctx context.Context, op string, c ops.Caller) (context.Context, ops.Caller, *index.Session, error) {
	if c.Handle != "" && c.Extension != "" {
		c.Handle = "" // the extension's capture credential names no agent
	}
	if c.Handle == "" {
		if err := s.who(op, c); err != nil {
			return ctx, c, nil, err
		}
	} else {
		var err error
		if ctx, c, err = s.admitHandle(ctx, op, c); err != nil {
			return ctx, c, nil, err
		}
		ctx = ops.WithCaller(ctx, c)
	}
	if c.Session == 0 {
		return ctx, c, nil, nil
	}
	sess, err := s.d.e.Session(ctx, c.Session)
	if err != nil {
		return ctx, c, nil, &apiError{Status: http.StatusGone, Code: "session_ended", Message: err.Error()}
	}
	return ctx, c, &sess, nil
}

// who checks that the caller may run op, by its routes' Who: a person's
// operation refuses an agent's session, an agent's needs one.
func (s *service) who(op string, c ops.Caller) error {
	var agentOnly, personOnly bool
	admitted := false
	for _, r := range s.routes[op] {
		switch r.Who {
		case api.Agent:
			agentOnly = true
			admitted = admitted || c.Session != 0
		case api.Person:
			personOnly = true
			// An MCP call without a session is an agent that has not
			// written yet, never a person.
			admitted = admitted || c.Session == 0 && c.Via != "mcp"
		case api.Extension:
			admitted = admitted || c.Extension != ""
		default:
			// A write over MCP acts for an agent: without a session it
			// would be a person's (a vetted add, say).
			admitted = admitted || c.Session != 0 || c.Via != "mcp" || s.reads(op)
		}
	}
	switch {
	case admitted:
		return nil
	case c.Via == "mcp" && c.Session == 0:
		return &apiError{Status: http.StatusBadRequest, Code: "no_session", Message: "this call writes, and acts for an agent: call it with the handle an earlier answer gave, or without one to be given a new agent"}
	case personOnly && c.Session != 0:
		return &apiError{Status: http.StatusForbidden, Code: "person_only", Message: refusals[op]}
	case agentOnly:
		msg := refusals[op]
		if msg == "" {
			msg = "send " + SessionHeader + " with the id POST /sessions gave you"
		}
		return &apiError{Status: http.StatusBadRequest, Code: "no_session", Message: msg}
	}
	return errCaptureOnly // the extension's credential, off its one route
}

// codeUnreachable is the code of the engine's refusals while the
// coordination store is out of reach (engine.ErrUnreachable).
const codeUnreachable = "coord_unreachable"

var errStarting = &apiError{Status: http.StatusServiceUnavailable, Code: "starting", Message: "snagd is reading the task files: try again in a moment"}

// answer is the error answer of err (answerOf), logged as snagd's logs
// say what failed on its side.
func (d *Daemon) answer(err error) *apiError {
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
	return a
}

// serveOps registers on mux the routes of api.Routes that carry an
// operation: each reads its caller, its path, its query (a GET) or its
// JSON body (a POST) into the operation's request, runs it on the
// service, and writes its answer with the route's status (or the one the
// answer asks for, ops.Statused). Routes of one method and path are told
// apart by their caller (an agent's session, a person, the extension)
// and their When.
func (d *Daemon) serveOps(mux *http.ServeMux, svc *service) {
	var order []string
	groups := map[string][]api.Route{}
	for _, r := range api.Routes {
		if r.Op == "" || svc.hs[r.Op] == nil {
			continue
		}
		p := r.Method + " " + r.Path
		if groups[p] == nil {
			order = append(order, p)
		}
		groups[p] = append(groups[p], r)
	}
	for _, p := range order {
		mux.HandleFunc(p, d.ready503(d.serveOp(svc, groups[p])))
	}
}

func (d *Daemon) serveOp(svc *service, routes []api.Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := ops.Caller{Via: "http", Extension: fromExtension(r), Handle: r.Header.Get(api.HandleHeader), Cred: d.credOf(r)}
		if h := r.Header.Get(SessionHeader); h != "" {
			id, err := strconv.ParseInt(h, 10, 64)
			if err != nil {
				writeError(w, &apiError{Status: http.StatusBadRequest, Code: "no_session", Message: "send " + SessionHeader + " with the id POST /sessions gave you"})
				return
			}
			c.Session, c.Tool = id, r.Header.Get(ToolHeader)
		}
		// Whose request this is comes first: a person's route refuses an
		// agent before its body is read. A handle may stand for the agent:
		// the service reads it (admit).
		if err := svc.who(pickRoute(routes, c, nil).Op, c); err != nil && c.Handle == "" {
			writeError(w, err.(*apiError))
			return
		}
		var raw []byte
		if r.Method == http.MethodPost {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					writeError(w, &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: tooLarge(mbe.Limit)})
					return
				}
				writeError(w, &apiError{Status: http.StatusBadRequest, Code: "bad_json", Message: "request body: " + err.Error()})
				return
			}
			raw = b
		}
		rt := pickRoute(routes, c, raw)
		desc, _ := ops.Lookup(rt.Op)
		req := reflect.New(desc.Req)
		if e := readRequest(r, raw, req.Interface()); e != nil {
			writeError(w, e)
			return
		}
		ans, err := svc.Do(ops.WithCaller(r.Context(), c), rt.Op, req.Elem().Interface())
		// While the coordination store is out of reach, every answer to an
		// agent says so (engine.CoordNotice), and so does any answer that
		// failed for it: a client then says so at once instead of sending
		// the request again until it gives up.
		notice := ""
		if c.Session != 0 {
			notice = d.e.CoordNotice(r.Context(), c.Session)
		}
		var a *apiError
		if errors.As(err, &a) && a.Code == codeUnreachable && notice == "" {
			notice = a.Message
		}
		if notice != "" {
			w.Header().Set(api.CoordHeader, notice)
		}
		if err != nil {
			writeError(w, answerOf(err))
			return
		}
		status := rt.Status
		if st, ok := ans.(ops.Statused); ok {
			status, _ = st.AnswerStatus(status)
		}
		if render := renderers[rt.Op]; render != nil && render(w, status, req.Elem().Interface(), ans) {
			return
		}
		writeJSON(w, status, ans)
	}
}

// renderers write an operation's answer over HTTP as something other
// than JSON when its request asks for it (GET /graph?format=svg): how
// HTTP presents an answer, not what the operation answers. A renderer
// that returns false has written nothing, and the answer goes as JSON.
var renderers = map[string]func(w http.ResponseWriter, status int, req, ans any) bool{
	ops.GetGraph.Name: renderGraph,
}

// pickRoute is the route of routes (one method and path) that serves a
// request: the first whose When the body sets and whose Who is the
// caller's, else the first whose Who is (the service refuses a caller of
// the wrong kind, with the route's own words).
func pickRoute(routes []api.Route, c ops.Caller, raw []byte) api.Route {
	if len(routes) == 1 {
		return routes[0]
	}
	var flags map[string]json.RawMessage
	if len(raw) > 0 {
		json.Unmarshal(raw, &flags)
	}
	fits := func(r api.Route) bool {
		switch r.Who {
		case api.Agent: // a handle names an agent too
			return c.Session != 0 || c.Handle != ""
		case api.Person:
			return c.Session == 0 && c.Handle == ""
		case api.Extension:
			return c.Extension != ""
		}
		return true
	}
	for _, r := range routes {
		if r.When != "" && string(flags[r.When]) == "true" && fits(r) {
			return r
		}
	}
	for _, r := range routes {
		if r.When == "" && fits(r) {
			return r
		}
	}
	return routes[0]
}

// readRequest reads an operation's request from r: its path segments,
// then its query (a GET) or its JSON body (a POST, raw). An unknown
// field, parameter or unreadable value is refused with a 400 naming it.
func readRequest(r *http.Request, raw []byte, req any) *apiError {
	if r.Method == http.MethodGet {
		if err := ops.DecodeQuery(r.URL.Query(), req); err != nil {
			return err.(*apiError)
		}
	} else if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(req); err != nil {
			return &apiError{Status: http.StatusBadRequest, Code: "bad_json", Message: "request body: " + err.Error()}
		}
	}
	if err := ops.SetPath(req, r.PathValue); err != nil {
		return err.(*apiError)
	}
	return nil
}
