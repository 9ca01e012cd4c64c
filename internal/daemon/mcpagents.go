package daemon

import (
	"context"
	"net/http"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/mcp"
	"github.com/snagdev/snag/internal/ops"
)

// The sessionless protocol on /mcp (MCP 2026-07-28): no initialize and no
// Mcp-Session-Id, each request whole in itself. Its requests go to a
// stateless handler whose servers (one per toolset list and credential)
// act through an agentLink: no connection stands for an agent, so a call
// acts for the agent its handle names, a read for no one, and a write that
// names no handle for a new agent, whose handle its answer gives.

// modern reports whether r speaks the sessionless protocol: its
// MCP-Protocol-Version header names 2026-07-28 or later (a client of that
// protocol sends it on every request).
func modern(r *http.Request) bool {
	v := r.Header.Get("Mcp-Protocol-Version")
	return v != "" && v >= "2026-07-28"
}

// agentServer is the SDK's getServer of the stateless handler: the server
// of r's toolsets and credential, made at its first use. There are at most
// as many as sets of toolsets (one spelling each) times credentials; the
// servers of one credential share its snag_list cursors.
func (h *mcpHTTP) agentServer(r *http.Request) *sdk.Server {
	ts, _ := toolsetsOf(r)
	cred := h.d.credOf(r)
	key := strings.Join(ts, ",") + "|" + cred
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil // snagd is stopping: the SDK answers 400
	}
	if srv := h.agents[key]; srv != nil {
		return srv
	}
	link := &agentLink{d: h.d, cred: cred, life: h.life}
	cursors := h.cursors[cred]
	if cursors == nil {
		cursors = &mcp.Cursors{}
		h.cursors[cred] = cursors
	}
	srv := mcp.NewServer(mcp.Options{Root: h.d.root, Version: h.d.opts.Version, Log: h.d.log, Daemon: mcp.NewDaemon(link),
		Toolsets: ts, Workspace: h.d.workspace, HandleIdle: h.d.handleIdle(), Cursors: cursors})
	h.agents[key] = srv
	return srv
}

// forgetAgentServers drops the servers made for hosted credentials, as
// the hosted token changes: the next request makes one for the new token.
func (h *mcpHTTP) forgetAgentServers() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.agents {
		if strings.Contains(k, "|hosted:") {
			delete(h.agents, k)
		}
	}
	for cred := range h.cursors {
		if strings.HasPrefix(cred, "hosted:") {
			delete(h.cursors, cred)
		}
	}
}

// agentLink is the mcp.Link of the sessionless protocol: it holds no
// session. Every call acts for the agent its handle names (snagd's
// service reads it), a read for no agent, and a write without a handle
// for an agent registered for it, held by its handle for HandleIdle.
type agentLink struct {
	d    *Daemon
	cred string
	life context.Context // ends as snagd stops serving /mcp: Watch returns
}

// Do runs an operation on snagd's service in process.
func (l *agentLink) Do(ctx context.Context, op string, req any) (any, error) {
	return l.d.svc.Do(ctx, op, req)
}

// SetClient does nothing: each call carries its client (mcp.CallOf).
func (l *agentLink) SetClient(string, string) {}

// Session is the session a call acts for: 0 when it names a handle (the
// service reads the agent from it) or only reads; for a write naming none,
// a new agent named for its client, whose handle the call's answer gives.
func (l *agentLink) Session(ctx context.Context, op string) (int64, error) {
	c := mcp.CallOf(ctx)
	switch {
	case c == nil || op == "" || l.d.svc.reads(op):
		return 0, nil
	case c.Handle != "":
		return 0, nil
	case c.Session != 0:
		return c.Session, nil // registered earlier in this call
	}
	s, h, err := l.d.registerAgent(ctx, c.Client, c.Version, l.cred)
	if err != nil {
		return 0, err
	}
	c.Agent, c.Session = h, s.ID
	return s.ID, nil
}

// Cred names the credential of the link's requests.
func (l *agentLink) Cred() string { return l.cred }

// SessionID is 0: the link holds no session.
func (l *agentLink) SessionID() int64 { return 0 }

// Ended does nothing: the link holds no session to let go.
func (l *agentLink) Ended(int64) {}

// Notice is what every tool result says while snagd cannot reach its
// coordination store (engine.CoordNotice), for the agent the call in ctx
// acted for: the one it made, or the one its handle names.
func (l *agentLink) Notice(ctx context.Context) string {
	c := mcp.CallOf(ctx)
	if c == nil {
		return ""
	}
	id := c.Session
	if id == 0 && c.Handle != "" {
		if h, _, err := l.d.e.Handle(ctx, c.Handle, l.cred); err == nil {
			id = h.SessionID
		}
	}
	if id == 0 {
		return ""
	}
	return l.d.e.CoordNotice(ctx, id)
}

// Watch calls on with the key of each task an event of the engine names
// until ctx ends or snagd stops serving /mcp.
func (l *agentLink) Watch(ctx context.Context, on func(key string)) { l.d.watch(ctx, l.life, on) }

// Close does nothing: agents end by their idle time.
func (l *agentLink) Close() error { return nil }

var _ mcp.Link = (*agentLink)(nil)

// readsByPost are the operations that only read though their route is a
// POST (a body carries what they read).
var readsByPost = map[string]bool{ops.CheckFiles.Name: true}

// reads reports whether op only reads: every route of it is a GET, or it
// is one of readsByPost.
func (s *service) reads(op string) bool {
	rs := s.routes[op]
	return readsByPost[op] || len(rs) > 0 && !slices.ContainsFunc(rs, func(r api.Route) bool { return r.Method != http.MethodGet })
}
