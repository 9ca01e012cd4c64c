package daemon

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/mcp"
)

// MCPPath is where snagd serves the MCP server over Streamable HTTP.
const MCPPath = "/mcp"

// DefaultMCPIdle is how long an MCP session over HTTP lives with no request
// in flight when its client never held a GET stream: nothing tells a
// crashed client from one that is thinking, so this is the longest pause
// between calls such a client gets.
const DefaultMCPIdle = 10 * time.Minute

// DefaultMCPStreamGrace is how long an MCP session over HTTP lives with no
// request in flight once its client's GET stream has closed: a client holds
// that stream for its whole life (the SDKs, hosts and inspectors do) and
// reopens it within seconds after a blip, so a stream that stays closed is
// a client that has gone without saying so (no DELETE).
const DefaultMCPStreamGrace = 30 * time.Second

// mcpHTTP serves snag's MCP server (the same tools, resources, labels and
// audit as snag mcp) over Streamable HTTP, behind the guard. Each MCP
// session gets its own server whose backend runs snagd's operations in
// process (mcp.Daemon over an engineLink): it registers a snag session named for the MCP client and
// holds it open, as the stdio bridge holds its session stream. When the MCP
// session ends (DELETE, idle past opts.MCPIdle, its GET stream gone past
// opts.MCPStreamGrace, a person ending it, or snagd stopping) the backend
// lets the session go, and its leases are released after the grace.
//
// Session ids come from the SDK, which answers 404 to one it does not know.
type mcpHTTP struct {
	d    *Daemon
	idle time.Duration // with no GET stream ever held
	lost time.Duration // after the last GET stream closed
	sdk  *sdk.StreamableHTTPHandler
	// hosted serves /mcp on the hosted listener (see hosted.go): the same
	// servers, behind its own guard, with the SDK's loopback Host check
	// off, since that guard admits only the names it was given. A session
	// lives on the listener that started it.
	hosted *sdk.StreamableHTTPHandler
	// shared answers the SDK's per-request question of protocol versions
	// for requests that do not start a session; it serves no session.
	shared     *sdk.Server
	sharedOnce sync.Once // shared is made at its first use: a view no MCP client asks keeps none
	// stateless and hostedStateless serve the sessionless protocol
	// (mcpagents.go) on either listener, from the servers in agents (by
	// toolsets and credential); cursors are snag_list's short cursors,
	// good across their requests.
	stateless, hostedStateless *sdk.StreamableHTTPHandler
	agents                     map[string]*sdk.Server
	cursors                    map[string]*mcp.Cursors // by credential
	life                       context.Context         // ends with the view's serving

	mu      sync.Mutex
	pending map[*sdk.Server]*mcpSession // made for a request, not yet bound to its session id
	byID    map[string]*mcpSession
	closed  bool
}

// mcpSession is one MCP session over HTTP and its backend.
type mcpSession struct {
	srv    *sdk.Server
	hosted bool        // started over the hosted listener
	link   *engineLink // the snag session's side of live
	live   *mcp.Daemon // the tools' backend
	ss     *sdk.ServerSession
	active int         // requests of the session in flight, GET streams included
	gets   int         // GET streams open
	held   bool        // a GET stream was open once
	last   time.Time   // when the last request began or ended
	ends   time.Time   // when timer fires, while it is armed
	timer  *time.Timer // closes the session once idle
}

// slotKey carries, per HTTP request, the server made for it: the SDK asks
// for the server more than once while it serves one request.
type slotKey struct{}

type slot struct{ s *mcpSession }

func (d *Daemon) mcpHandler(ctx context.Context) *mcpHTTP {
	h := &mcpHTTP{d: d, idle: d.opts.MCPIdle, lost: d.opts.MCPStreamGrace, pending: map[*sdk.Server]*mcpSession{}, byID: map[string]*mcpSession{},
		agents: map[string]*sdk.Server{}, cursors: map[string]*mcp.Cursors{}, life: ctx}
	if h.idle <= 0 {
		h.idle = DefaultMCPIdle
	}
	if h.lost <= 0 {
		h.lost = DefaultMCPStreamGrace
	}
	h.lost = min(h.lost, h.idle)
	// The guard in front has checked Host, Origin and the token; the
	// SDK's own Host check stays on too.
	h.sdk = sdk.NewStreamableHTTPHandler(h.server, &sdk.StreamableHTTPOptions{Logger: d.log, MaxRequestBodyBytes: MaxBody})
	h.hosted = sdk.NewStreamableHTTPHandler(h.server, &sdk.StreamableHTTPOptions{Logger: d.log, MaxRequestBodyBytes: MaxBody,
		DisableLocalhostProtection: true})
	h.stateless = sdk.NewStreamableHTTPHandler(h.agentServer, &sdk.StreamableHTTPOptions{Logger: d.log, MaxRequestBodyBytes: MaxBody, Stateless: true})
	h.hostedStateless = sdk.NewStreamableHTTPHandler(h.agentServer, &sdk.StreamableHTTPOptions{Logger: d.log, MaxRequestBodyBytes: MaxBody,
		Stateless: true, DisableLocalhostProtection: true})
	go func() {
		<-ctx.Done()
		h.close()
	}()
	return h
}

// server is the SDK's getServer: a new server, with its own backend, for a
// POST that starts a session; the shared one otherwise.
func (h *mcpHTTP) server(r *http.Request) *sdk.Server {
	sl, _ := r.Context().Value(slotKey{}).(*slot)
	if sl == nil || r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		h.sharedOnce.Do(func() {
			h.shared = mcp.NewServer(mcp.Options{Root: h.d.root, Version: h.d.opts.Version, Log: h.d.log, Workspace: h.d.workspace,
				HandleIdle: h.d.handleIdle()})
		})
		return h.shared
	}
	if sl.s != nil {
		return sl.s.srv
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil // snagd is stopping: the SDK answers 400
	}
	link := newEngineLink(h.d, h.d.credOf(r))
	s := &mcpSession{link: link, live: mcp.NewDaemon(link), hosted: isHosted(r)}
	ts, _ := toolsetsOf(r)
	opts := mcp.Options{Root: h.d.root, Version: h.d.opts.Version, Log: h.d.log, Daemon: s.live, Toolsets: ts,
		Workspace: h.d.workspace, HandleIdle: h.d.handleIdle()}
	s.srv = mcp.NewServer(opts)
	sl.s = s
	h.mu.Lock()
	h.pending[s.srv] = s
	h.mu.Unlock()
	return s.srv
}

// workspace is the project's workspace name, "" before the engine runs.
func (d *Daemon) workspace() string {
	if d.e == nil {
		return ""
	}
	return d.e.Workspace()
}

// toolsetsOf reads the toolsets a session of /mcp asks for in its URL
// (/mcp?toolsets=queue,team); none asked serves queue.
func toolsetsOf(r *http.Request) ([]string, error) {
	var out []string
	for _, t := range strings.Split(r.URL.Query().Get("toolsets"), ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "":
		case !slices.Contains(mcp.Toolsets, t):
			return nil, fmt.Errorf("toolsets: unknown toolset %q: use %s, comma-separated, as in %s?toolsets=queue,team",
				t, strings.Join(mcp.Toolsets, ", "), MCPPath)
		default:
			out = append(out, t)
		}
	}
	// One spelling of each set: the sessionless servers are kept by it.
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (h *mcpHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	hosted, handler := isHosted(r), h.sdk
	if hosted {
		handler = h.hosted
	}
	if _, err := toolsetsOf(r); err != nil {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: "bad_toolsets", Message: err.Error()})
		return
	}
	if ws := strings.TrimSpace(r.Header.Get(api.WorkspaceHeader)); ws != "" {
		if own := h.d.workspace(); own != "" && ws != own {
			// A guard against misrouting (a client configured for another
			// project), not access control: the token is that.
			writeError(w, &apiError{Status: http.StatusMisdirectedRequest, Code: "wrong_workspace", Message: fmt.Sprintf(
				"this snagd serves workspace %q, not %q: point the client at the snagd of %q (or fix its %s header); nothing was done",
				own, ws, ws, api.WorkspaceHeader)})
			return
		}
	}
	if modern(r) {
		if hosted {
			h.hostedStateless.ServeHTTP(w, r)
		} else {
			h.stateless.ServeHTTP(w, r)
		}
		return
	}
	if id == "" {
		sl := &slot{}
		handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), slotKey{}, sl)))
		if sl.s != nil {
			h.settle(sl.s)
		}
		return
	}
	get := r.Method == http.MethodGet
	s := h.begin(id, get, hosted)
	if s != nil {
		defer h.end(s, get)
	}
	handler.ServeHTTP(w, r)
}

// find is the session with the id started on the same listener (hosted
// or not); a session the SDK has connected but not yet answered for is
// found among the pending ones. h.mu must be held.
func (h *mcpHTTP) find(id string, hosted bool) *mcpSession {
	if s := h.byID[id]; s != nil {
		if s.hosted != hosted {
			return nil
		}
		return s
	}
	for srv, s := range h.pending {
		if s.hosted != hosted {
			continue
		}
		for ss := range srv.Sessions() {
			if ss.ID() == id {
				h.bind(s, ss)
				return s
			}
		}
	}
	return nil
}

// bind records a session's id and watches for its end. h.mu must be held.
func (h *mcpHTTP) bind(s *mcpSession, ss *sdk.ServerSession) {
	delete(h.pending, s.srv)
	s.ss = ss
	h.byID[ss.ID()] = s
	go func() {
		ss.Wait()
		h.mu.Lock()
		if h.byID[ss.ID()] == s {
			delete(h.byID, ss.ID())
		}
		if s.timer != nil {
			s.timer.Stop()
		}
		h.mu.Unlock()
		s.live.Close() // the engine ends the snag session after the grace
	}()
}

// settle runs after the request that made a session's server: the session
// is bound to its id and its idle clock starts; a server that got no
// session (initialize failed) gives back its backend.
func (h *mcpHTTP) settle(s *mcpSession) {
	h.mu.Lock()
	if s.ss == nil {
		for ss := range s.srv.Sessions() {
			h.bind(s, ss)
			break
		}
	}
	if s.ss == nil {
		delete(h.pending, s.srv)
		h.mu.Unlock()
		s.live.Close()
		return
	}
	if h.closed {
		h.mu.Unlock()
		s.ss.Close()
		return
	}
	if s.active == 0 && h.byID[s.ss.ID()] == s {
		h.armLocked(s)
	}
	h.mu.Unlock()
}

// begin counts a request of a known session as in flight (a GET is its
// stream).
func (h *mcpHTTP) begin(id string, get, hosted bool) *mcpSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.find(id, hosted)
	if s == nil {
		return nil // the SDK answers 404
	}
	s.active++
	if get {
		s.gets++
		s.held = true
	}
	s.last = time.Now()
	if s.timer != nil {
		s.timer.Stop()
		s.ends = time.Time{}
	}
	return s
}

// end counts a request done; with none left in flight the idle clock starts.
func (h *mcpHTTP) end(s *mcpSession, get bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if get {
		s.gets--
	}
	s.last = time.Now()
	if s.active--; s.active == 0 && h.byID[s.ss.ID()] == s {
		h.armLocked(s)
	}
}

// armLocked starts a session's idle clock: the short one when its client
// held a GET stream and no longer does, the long one otherwise. h.mu must
// be held.
func (h *mcpHTTP) armLocked(s *mcpSession) {
	after, why := h.idle, "no request"
	if s.held {
		after, why = h.lost, "its GET stream closed and no request came"
	}
	s.ends = time.Now().Add(after)
	if s.timer == nil {
		ss := s.ss
		s.timer = time.AfterFunc(after, func() {
			h.d.log.Info("mcp over http: session idle; closing it", "why", why, "for", after)
			ss.Close()
		})
		return
	}
	s.timer.Reset(after)
}

// mcpState is what /mcp knows of the HTTP session behind a snag session.
type mcpState struct {
	Working bool      // a request is in flight (a GET stream aside)
	Stream  bool      // the client holds its GET stream
	Held    bool      // it held one once
	Last    time.Time // when the last request began or ended
	Ends    time.Time // when snagd closes it unless a request comes; zero while it is in use
}

// states maps snag session ids to the state of their MCP sessions over
// HTTP.
func (h *mcpHTTP) states() map[int64]mcpState {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int64]mcpState{}
	for _, s := range h.byID {
		if id := s.link.SessionID(); id != 0 {
			out[id] = mcpState{Working: s.active > s.gets, Stream: s.gets > 0, Held: s.held, Last: s.last, Ends: s.ends}
		}
	}
	return out
}

// closeSession closes the MCP session whose backend holds snag session id,
// if there is one: its client's next request gets 404 (start a new
// session).
func (h *mcpHTTP) closeSession(id int64) {
	h.mu.Lock()
	var ss *sdk.ServerSession
	for _, s := range h.byID {
		if s.link.SessionID() == id {
			ss = s.ss
		}
	}
	h.mu.Unlock()
	if ss != nil {
		ss.Close()
	}
}

// closeHosted closes every session started over the hosted listener, as
// its token changes: their clients' next requests need the new token and
// a new session, and no GET stream goes on under the old one.
func (h *mcpHTTP) closeHosted() {
	h.mu.Lock()
	var sessions []*sdk.ServerSession
	for _, s := range h.byID {
		if s.hosted {
			sessions = append(sessions, s.ss)
		}
	}
	h.mu.Unlock()
	for _, ss := range sessions {
		ss.Close()
	}
	h.forgetAgentServers()
}

// close ends every session, as snagd stops: open GET streams return, and
// every backend closes its snag session's stream.
func (h *mcpHTTP) close() {
	h.mu.Lock()
	h.closed = true
	var sessions []*sdk.ServerSession
	for _, s := range h.byID {
		sessions = append(sessions, s.ss)
	}
	h.mu.Unlock()
	for _, ss := range sessions {
		ss.Close()
	}
}
