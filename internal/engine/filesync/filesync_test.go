package filesync_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/workspace"
)

// sample copies .snag-example into a fresh project root, without plan.json.
func sample(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	snagdtest.CopySample(t, root)
	os.Remove(filepath.Join(root, project.Folder, project.PlanFile))
	return root
}

// serve opens a workspace on opts.Root as snagd alone does, a member of
// the repository's embedded live state (opts.Home is the test's own), and
// runs it (the watcher, the file sync's looks and the engine's loops)
// until the test ends, once it is ready: every file read and the leases
// reconciled. stop ends the run and closes the workspace, as snagd does,
// before the test ends if it is called.
func serve(t *testing.T, opts engine.Options) (e *engine.Engine, stop func()) {
	t.Helper()
	live, err := coord.OpenEmbedded(context.Background(), filepath.Join(t.TempDir(), coord.EmbeddedFile),
		coord.Options{Host: "test", Root: opts.Root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Close)
	opts.Home, opts.Coord = t.TempDir(), live
	w, err := workspace.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	e = w.Engine
	wait, done := context.WithTimeout(ctx, 20*time.Second)
	defer done()
	if err := e.WaitReady(wait); err != nil {
		t.Fatalf("not ready: %v", err)
	}
	// The first reconcile of the leases with the live state follows the
	// first rescan; it sets nothing a test can wait on but Ready.
	for !e.Ready() {
		select {
		case <-wait.Done():
			t.Fatal("the workspace did not become ready after 20 s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return e, stop
}
