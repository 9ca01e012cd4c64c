package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool registers a typed tool as the SDK's sdk.AddTool does, with one
// difference: the output is encoded once, with the answer, and not
// validated against the output schema on every call.
//
// The SDK's typed registration checks every result by unmarshalling its JSON
// into maps and walking the schema (a quarter of the bridge's CPU for a
// snag_list of 20 rows, most of it building errors for the anyOf branches of
// nullable fields that do not match). Our results are Go values of the
// types the output schemas are inferred from, so they cannot drift from
// them; the tests check every tool's structuredContent against the schema
// that tools/list declares instead (mcp's test bridge validates each answer).
//
// The arguments a model writes are still checked as the SDK checks them:
// unknown or mistyped properties are a tool error naming the property, and
// defaults are applied, before the handler sees them. Arguments of null are
// {}, where the SDK's (v1.8.0) panics applying defaults to them.
//
// Rechecked against v1.8.0 and measured (docs/decisions.md, "rechecked
// against go-sdk v1.8.0"): the SDK's AddTool doubled the bridge's CPU per
// snag_list.
func addTool[In, Out any](srv *sdk.Server, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	if t.InputSchema == nil {
		t.InputSchema = schema[In](func(map[string]*jsonschema.Schema) {})
	}
	in, ok := t.InputSchema.(*jsonschema.Schema)
	if !ok {
		panic(fmt.Sprintf("tool %s: input schema is a %T, want *jsonschema.Schema", t.Name, t.InputSchema))
	}
	resolved, err := in.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err))
	}
	srv.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		// A bug in a tool must not take down the process that serves every
		// agent (snagd, for /mcp): like net/http's handlers, the call
		// fails, and the stack goes to stderr (snagd.log).
		defer func() {
			if p := recover(); p != nil {
				fmt.Fprintf(os.Stderr, "snag: panic in tool %s: %v\n%s", t.Name, p, debug.Stack())
				res, err = toolError(fmt.Errorf("internal error in %s (a bug: the stack is in snag's log; please report it)", t.Name)), nil
			}
		}()
		args, err := arguments[In](req.Params.Arguments, resolved)
		if err != nil {
			return toolError(fmt.Errorf("validating \"arguments\": %v", err)), nil
		}
		res, out, err := h(ctx, req, args)
		if err != nil {
			if wire, ok := err.(*jsonrpc.Error); ok {
				return nil, wire
			}
			return toolError(err), nil
		}
		if res == nil {
			res = &sdk.CallToolResult{}
		}
		if res.Content != nil {
			// The SDK encodes the value with the answer: once, where
			// JSON made here would be checked and copied again.
			res.StructuredContent = out
			return res, nil
		}
		raw, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("marshaling output: %w", err)
		}
		res.StructuredContent = json.RawMessage(raw)
		res.Content = []sdk.Content{&sdk.TextContent{Text: string(raw)}}
		return res, nil
	})
}

// arguments decodes a tool call's arguments into In after checking them
// against the input schema and applying its defaults. No arguments, or
// null, are {}; anything but an object is refused.
func arguments[In any](raw json.RawMessage, resolved *jsonschema.Resolved) (In, error) {
	var in In
	var m map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return in, fmt.Errorf("arguments must be a JSON object: %w", err)
		}
	}
	if m == nil {
		m = map[string]any{}
	}
	if err := resolved.ApplyDefaults(&m); err != nil {
		return in, fmt.Errorf("applying schema defaults:\n%w", err)
	}
	if err := resolved.Validate(&m); err != nil {
		return in, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return in, err
	}
	err = json.Unmarshal(b, &in)
	return in, err
}

// toolError is a tool result that reports err to the model.
func toolError(err error) *sdk.CallToolResult {
	var res sdk.CallToolResult
	res.SetError(err)
	return &res
}
