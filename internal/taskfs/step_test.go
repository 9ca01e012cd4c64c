package taskfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/snagdev/snag/internal/taskfs"
)

// TestDirStepsInOrder: the hook sees every step of a rewrite and of a new
// file, in the order they happen.
func TestDirStepsInOrder(t *testing.T) {
	folder := t.TempDir()
	d, err := taskfs.OpenDir(folder)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var got []string
	d.OnStep(func(step string) error { got = append(got, step); return nil })
	if err := d.Create("a.md", []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	want := []string{taskfs.StepTempCreated, taskfs.StepTempWritten, taskfs.StepTempSynced, taskfs.StepLinked, taskfs.StepTempRemoved, taskfs.StepDirSynced}
	if !slices.Equal(got, want) {
		t.Errorf("create steps: %v; want %v", got, want)
	}
	got = nil
	if _, _, err := d.Update("a.md", func(b []byte) ([]byte, error) { return []byte("two\n"), nil }); err != nil {
		t.Fatal(err)
	}
	want = []string{taskfs.StepTempCreated, taskfs.StepTempWritten, taskfs.StepTempSynced, taskfs.StepChecked, taskfs.StepRenamed, taskfs.StepDirSynced}
	if !slices.Equal(got, want) {
		t.Errorf("update steps: %v; want %v", got, want)
	}
}

// TestDirStepErrorLeavesTheFile (S9 at the unit level): an error injected
// at any step before the rename (ENOSPC here, as a full disk gives) fails
// the write with an error that names the fix, leaves the file's bytes as
// they were and no temp file behind.
func TestDirStepErrorLeavesTheFile(t *testing.T) {
	for _, at := range []string{taskfs.StepTempCreated, taskfs.StepTempWritten, taskfs.StepTempSynced} {
		t.Run(at, func(t *testing.T) {
			folder := t.TempDir()
			d, err := taskfs.OpenDir(folder)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if err := d.Create("a.md", []byte("original\n")); err != nil {
				t.Fatal(err)
			}
			d.OnStep(func(step string) error {
				if step == at {
					return syscall.ENOSPC
				}
				return nil
			})
			_, _, err = d.Update("a.md", func(b []byte) ([]byte, error) { return []byte("new\n"), nil })
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "free some space") {
				t.Errorf("update: %v; want ENOSPC naming the fix", err)
			}
			if err := d.Create("b.md", []byte("b\n")); !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("create: %v; want ENOSPC", err)
			}
			if b, _ := os.ReadFile(filepath.Join(folder, "a.md")); string(b) != "original\n" {
				t.Errorf("a.md holds %q after the failed write", b)
			}
			if _, err := os.Stat(filepath.Join(folder, "b.md")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("b.md exists after its create failed: %v", err)
			}
			ents, _ := os.ReadDir(folder)
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), taskfs.TempSuffix) {
					t.Errorf("temp file left: %s", e.Name())
				}
			}
		})
	}
}
