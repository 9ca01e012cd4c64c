package filesync_test

import (
	"testing"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/workspace/workspacetest"
)

// serve runs a workspace with opts on a real folder until the test ends
// (workspacetest.Run), once it serves; stop ends it earlier.
func serve(t *testing.T, opts engine.Options) (e *engine.Engine, stop func()) {
	t.Helper()
	w, stop := workspacetest.Run(t, opts)
	return w.Engine, stop
}
