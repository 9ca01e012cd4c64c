package team_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/workspace"
)

// A workspace runs the team service once the engine's first rescan is
// done: its first reconcile makes the engine ready, as snagd's start
// needs, and every loop ends with the context.
func TestRunReconcilesAtTheStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := t.TempDir()
	snagdtest.CopySample(t, root)
	os.Remove(filepath.Join(root, project.Folder, project.PlanFile))
	live, err := coord.OpenEmbedded(ctx, filepath.Join(t.TempDir(), coord.EmbeddedFile), coord.Options{Host: "test", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Close)
	w, err := workspace.Open(ctx, engine.Options{Root: root, Home: t.TempDir(), Coord: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	wait, waited := context.WithTimeout(ctx, 30*time.Second)
	defer waited()
	if err := w.Engine.WaitServing(wait); err != nil {
		t.Fatalf("the engine did not serve 30 s after the start (the team's first reconcile did not run): %v", err)
	}
	if got := w.Engine.Progress().Reconciles; got != 1 {
		t.Errorf("reconciles after the start: %d; want 1", got)
	}
	cancel()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the workspace's run: %v", err)
	}
}
