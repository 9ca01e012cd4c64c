package mcp

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// forkVariant, for the side-by-side benchmark only: SNAG_MCP_SDK names the
// SDK's pieces to use (transport, tool).
var sdkPieces = os.Getenv("SNAG_MCP_SDK")

func useSDK(piece string) bool { return strings.Contains(sdkPieces, piece) }

// sdkAddTool registers a typed tool with the SDK's AddTool, its handler
// guarded against panics.
func sdkAddTool[In, Out any](srv *sdk.Server, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	if t.InputSchema == nil {
		t.InputSchema = schema[In](func(map[string]*jsonschema.Schema) {})
	}
	sdk.AddTool(srv, t, func(ctx context.Context, req *sdk.CallToolRequest, in In) (res *sdk.CallToolResult, out Out, err error) {
		defer func() {
			if p := recover(); p != nil {
				fmt.Fprintf(os.Stderr, "snag: panic in tool %s: %v\n%s", t.Name, p, debug.Stack())
				var zero Out
				res, out, err = nil, zero, fmt.Errorf("internal error in %s (a bug: the stack is in snag's log; please report it)", t.Name)
			}
		}()
		return h(ctx, req, in)
	})
}
