package api_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
)

// TestRoutesCarryTheirOperations checks that every route naming an
// operation names a declared one, and that the route's query, body and
// answer are that operation's request and answer: a GET's query is the
// request (or it has only path fields), a POST's body is the request or
// is inlined in it.
func TestRoutesCarryTheirOperations(t *testing.T) {
	served := map[string]bool{}
	for _, r := range api.Routes {
		if r.Op == "" {
			continue
		}
		served[r.Op] = true
		d, ok := ops.Lookup(r.Op)
		if !ok {
			t.Errorf("%s %s names operation %q, which package ops does not declare", r.Method, r.Path, r.Op)
			continue
		}
		if r.Answer == nil || reflect.TypeOf(r.Answer) != d.Ans {
			t.Errorf("%s %s answers %T, but %s answers %v", r.Method, r.Path, r.Answer, r.Op, d.Ans)
		}
		body := r.Request
		if r.Method == "GET" {
			body = r.Query
		}
		switch {
		case body == nil && hasWire(d.Req):
			t.Errorf("%s %s takes nothing, but %s's request %v has query or body fields", r.Method, r.Path, r.Op, d.Req)
		case body != nil && !carries(d.Req, reflect.TypeOf(body)):
			t.Errorf("%s %s takes %T, but %s's request is %v", r.Method, r.Path, body, r.Op, d.Req)
		}
		for _, seg := range strings.Split(r.Path, "/") {
			if name, ok := strings.CutPrefix(seg, "{"); ok && !hasPath(d.Req, strings.TrimSuffix(name, "}")) {
				t.Errorf("%s %s: %s's request %v has no field for %s", r.Method, r.Path, r.Op, d.Req, seg)
			}
		}
	}
	for _, name := range []string{"list", "claim", "release", "resolve", "context"} {
		if !served[name] {
			t.Errorf("no route carries %s", name)
		}
	}
}

func carries(req, body reflect.Type) bool {
	if req == body {
		return true
	}
	for i := range req.NumField() {
		if f := req.Field(i); f.Anonymous && f.Type == body {
			return true
		}
	}
	return false
}

func hasWire(t reflect.Type) bool {
	for _, f := range reflect.VisibleFields(t) {
		if _, path := f.Tag.Lookup("path"); f.IsExported() && !f.Anonymous && !path {
			return true
		}
	}
	return false
}

func hasPath(t reflect.Type, name string) bool {
	for _, f := range reflect.VisibleFields(t) {
		if f.Tag.Get("path") == name {
			return true
		}
	}
	return false
}
