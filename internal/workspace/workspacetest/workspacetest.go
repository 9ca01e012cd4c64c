// Package workspacetest opens workspaces in a test's own process, as
// snagd opens one for a worktree it serves: the engine and its services
// on a real folder, a member of the repository's embedded live state,
// run until the test ends. The tests of the engine's services use it;
// only tests import it.
package workspacetest

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
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/workspace"
)

// Sample copies the sample project (.snag-example) into a fresh root,
// without its plan.json, and returns the root.
func Sample(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	snagdtest.CopySample(t, root)
	os.Remove(filepath.Join(root, project.Folder, project.PlanFile))
	return root
}

// JoinLive opens the embedded live state in file ("" for a fresh one in a
// folder of the test's own) and joins it for root, as snagd joins the
// repository's; it is closed when the test ends.
func JoinLive(t testing.TB, root, file string) coord.Live {
	t.Helper()
	if file == "" {
		file = filepath.Join(t.TempDir(), coord.EmbeddedFile)
	}
	live, err := coord.OpenEmbedded(context.Background(), file, coord.Options{Host: "test", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Close)
	return live
}

// Run opens a workspace with opts (Home, when empty, is the test's own;
// Coord, when nil, a fresh embedded live state joined for opts.Root) and
// runs it until the test ends or stop is called, which ends its Run and
// closes it as snagd does. It returns once the engine serves
// (Engine.WaitServing: the first rescan and reconcile done), failing the
// test after a minute.
func Run(t testing.TB, opts engine.Options) (w *workspace.Workspace, stop func()) {
	t.Helper()
	if opts.Home == "" {
		opts.Home = t.TempDir()
	}
	if opts.Coord == nil {
		opts.Coord = JoinLive(t, opts.Root, "")
	}
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
				t.Errorf("the workspace's run: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Errorf("close the workspace: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	wait, done := context.WithTimeout(ctx, time.Minute)
	defer done()
	if err := w.Engine.WaitServing(wait); err != nil {
		t.Fatalf("the workspace did not serve within a minute: %v", err)
	}
	return w, stop
}

// Open is Run on a copy of the sample project, for tests that stop it
// only at their end.
func Open(t testing.TB) *workspace.Workspace {
	t.Helper()
	w, _ := Run(t, engine.Options{Root: Sample(t)})
	return w
}

// Register registers an agent's session named name (as a test client).
func Register(t testing.TB, w *workspace.Workspace, name string) index.Session {
	t.Helper()
	s, err := w.Engine.Register(context.Background(), index.Session{Name: name, Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// CodeOf is the code of the engine's refusal err, or "" when err is none.
func CodeOf(err error) string {
	var r *engine.Error
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}
