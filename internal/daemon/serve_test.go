package daemon

import (
	"testing"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
)

// TestEveryOperationIsServed checks that snagd's service has a body for
// every operation a route of api.Routes carries, and declares no body
// for an operation no route names: serveOps registers exactly those
// routes.
func TestEveryOperationIsServed(t *testing.T) {
	t.Parallel()
	s := newService(&Daemon{})
	named := map[string]bool{}
	for _, r := range api.Routes {
		if r.Op == "" {
			continue
		}
		named[r.Op] = true
		if s.hs[r.Op] == nil {
			t.Errorf("%s %s carries %s, which snagd's service does not serve", r.Method, r.Path, r.Op)
		}
	}
	for op := range s.hs {
		if !named[op] {
			t.Errorf("the service serves %s, which no route of api.Routes carries", op)
		}
		if _, ok := ops.Lookup(op); !ok {
			t.Errorf("the service serves %s, which package ops does not declare", op)
		}
	}
}
