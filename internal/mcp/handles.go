package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call is what one tool call carries beside its arguments, for the
// backend: the client that made it (from initialize, or the request's
// _meta in the sessionless protocol), the handle it names, and the agent
// handle snagd gave it when the call made a new agent. A Link reads it
// with CallOf.
type Call struct {
	Tool    string
	Client  string
	Version string
	// Handle is the handle the call names: a lease handle (release,
	// resolve) or an agent handle (any other write).
	Handle string
	// Agent is set by a Link that registered a new agent for this call:
	// the handle that names that agent from now on; Session is its id.
	Agent   string
	Session int64
}

type callKey struct{}

// CallOf is the call ctx serves, or nil outside a tool call.
func CallOf(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// clientOf is the client a request came from.
type clientOf interface{ ClientInfo() *sdk.Implementation }

// begin starts serving a tool call: it records the call (CallOf) with the
// MCP client's name and version, tells a connection's backend who its
// client is before the session is registered, and names the tool for
// snagd's audit.
func (s *server) begin(ctx context.Context, req clientOf, tool string) context.Context {
	c := CallOf(ctx)
	if c == nil {
		c = &Call{}
		ctx = context.WithValue(ctx, callKey{}, c)
	}
	c.Tool = tool
	if p := req.ClientInfo(); p != nil {
		c.Client, c.Version = p.Name, p.Version
		if d := s.daemon(); d != nil {
			d.SetClient(p.Name, p.Version)
		}
	}
	return withTool(ctx, tool)
}

// agentNotice makes every tool call's Call before its handler runs, and
// adds to the result of a call that made a new agent the handle to name it
// by (agentNote).
func (s *server) agentNotice(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		c := &Call{}
		res, err := next(context.WithValue(ctx, callKey{}, c), method, req)
		if r, ok := res.(*sdk.CallToolResult); ok && err == nil && c.Agent != "" {
			r.Content = append(r.Content, &sdk.TextContent{Text: strings.TrimPrefix(s.agentNote(c), "\n")})
		}
		return res, err
	}
}

// naming records the handle a call names.
func naming(ctx context.Context, handle string) context.Context {
	if c := CallOf(ctx); c != nil {
		c.Handle = strings.TrimSpace(handle)
	}
	return ctx
}

// agentNote is what a result says when its call made a new agent: the
// handle to name it by from now on, and how long it keeps without one.
func (s *server) agentNote(c *Call) string {
	if c == nil || c.Agent == "" {
		return ""
	}
	return fmt.Sprintf("\nagent: %s (send it as \"agent\" on your next calls to stay this agent; %s without one ends it)", c.Agent, idleWords(s.opts.HandleIdle))
}

// idleWords is an idle time as a description says it.
func idleWords(d time.Duration) string {
	if d <= 0 {
		d = DefaultHandleIdle
	}
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d min", int(d/time.Minute))
	}
	return d.String()
}

// DefaultHandleIdle is how long snagd keeps an agent known only by its
// handle when the server's options do not say (snagd's default).
const DefaultHandleIdle = 30 * time.Minute
