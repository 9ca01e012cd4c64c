package queue

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A person's save that lands after Update checked the file and before it
// swapped the new bytes in is not lost: the swap hands it back, and the
// edit is applied to it.
func TestUpdateKeepsASaveThatLandsJustBeforeTheSwap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the atomic swap is Linux's renameat2; elsewhere Update renames")
	}
	dir := t.TempDir()
	name := "SNAG-1 - A task.md"
	orig := []byte("---\nid: tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1C\nkey: SNAG-1\ntitle: A task\nstatus: open\n---\nBody.\n")
	if err := os.WriteFile(filepath.Join(dir, name), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	saved := append(bytes.Clone(orig), "A line the person added.\n"...)
	saves := 0
	d.OnStep(func(step string) error {
		if step == StepChecked && saves == 0 {
			saves++
			// The editor's save: temp and rename, as most editors do.
			tmp := filepath.Join(dir, ".editor-save")
			if err := os.WriteFile(tmp, saved, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	old, got, err := d.Update(name, func(cur []byte) ([]byte, error) {
		return bytes.Replace(cur, []byte("status: open"), []byte("status: claimed"), 1), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Replace(saved, []byte("status: open"), []byte("status: claimed"), 1)
	disk, _ := os.ReadFile(filepath.Join(dir, name))
	if !bytes.Equal(disk, want) || !bytes.Equal(got, want) {
		t.Errorf("after the race the file holds\n%s\nwant\n%s", disk, want)
	}
	if !bytes.Equal(old, saved) {
		t.Errorf("Update says it edited\n%s\nwant the person's save", old)
	}
	if temps, _ := d.Temps(0); len(temps) != 0 {
		t.Errorf("temp files left: %v", temps)
	}
}
