package client

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
)

// Do runs one operation on snagd over HTTP: Caller is an ops.Service, the
// one the MCP bridge's tools call. The operation's route (api.Routes) says
// the method and path; req's path fields fill the path, and its query
// fields (a GET) or its JSON (a POST) carry the rest. A non-2xx answer is
// an *Error.
func (k Caller) Do(ctx context.Context, op string, req any) (any, error) {
	d, ok := ops.Lookup(op)
	if !ok {
		return nil, fmt.Errorf("no operation %q: this client does not know it", op)
	}
	rt, ok := routeOf(op, req)
	if !ok {
		return nil, fmt.Errorf("no route carries operation %q", op)
	}
	path := ops.Path(rt.Path, req)
	var body any
	if rt.Method == "GET" {
		if q := ops.EncodeQuery(req); q != "" {
			path += "?" + q
		}
	} else {
		body = req
		if rt.When != "" {
			b, err := withFlag(req, rt.When)
			if err != nil {
				return nil, err
			}
			body = b
		}
	}
	out := reflect.New(d.Ans)
	if err := k.do(ctx, rt.Method, path, body, out.Interface()); err != nil {
		return nil, err
	}
	return out.Elem().Interface(), nil
}

// call runs op through k with its types.
func call[Req, Ans any](ctx context.Context, k Caller, op ops.Op[Req, Ans], req Req) (Ans, error) {
	return ops.Call(ctx, k, op, req)
}

// routeOf is the route that carries op for req: of several (POST /claim
// and POST /tasks/{ref}/claim), the one whose path req fills the most.
func routeOf(op string, req any) (api.Route, bool) {
	var best api.Route
	found, score := false, -1
	for _, r := range api.Routes {
		if r.Op != op {
			continue
		}
		n := strings.Count(r.Path, "{")
		if strings.Contains(ops.Path(r.Path, req), "//") || strings.HasSuffix(ops.Path(r.Path, req), "/") {
			n = -1 // a path segment req leaves empty
		}
		if n > score {
			best, found, score = r, true, n
		}
	}
	return best, found
}

// withFlag is req's JSON with field set true: the body of a route picked
// by its When (dry_run).
func withFlag(req any, field string) (json.RawMessage, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m[field] = json.RawMessage("true")
	return json.Marshal(m)
}
