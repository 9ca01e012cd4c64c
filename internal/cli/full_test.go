package cli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSnagdIsFoundBesideSnagThenOnPath: the lean snag runs the snagd beside
// it (as it was started, before symlinks) before one on PATH, and names the
// fix when there is none.
func TestSnagdIsFoundBesideSnagThenOnPath(t *testing.T) {
	dir := t.TempDir()
	beside, onPath := filepath.Join(dir, "install"), filepath.Join(dir, "path")
	for _, d := range []string{beside, onPath} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "snagd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(SnagdEnv, "")
	t.Setenv("PATH", onPath)
	saved := os.Args[0]
	t.Cleanup(func() { os.Args[0] = saved })

	os.Args[0] = filepath.Join(beside, "snag")
	if got, err := snagd(); err != nil || got != filepath.Join(beside, "snagd") {
		t.Errorf("snag in %s: snagd() = %q, %v; want the one beside it", beside, got, err)
	}
	os.Args[0] = filepath.Join(dir, "snag") // nothing beside it: PATH's
	if got, err := snagd(); err != nil || got != filepath.Join(onPath, "snagd") {
		t.Errorf("snag in %s: snagd() = %q, %v; want the one on PATH", dir, got, err)
	}
	t.Setenv("PATH", filepath.Join(dir, "empty"))
	if got, err := snagd(); !errors.Is(err, errNoSnagd) {
		t.Errorf("no snagd anywhere: snagd() = %q, %v; want errNoSnagd", got, err)
	}
	t.Setenv(SnagdEnv, "/somewhere/snagd")
	if got, err := snagd(); err != nil || got != "/somewhere/snagd" {
		t.Errorf("$SNAGD set: snagd() = %q, %v; want $SNAGD", got, err)
	}
}
