package taskfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/codec"
)

// swapTask is the task file the swap tests race saves on, and swapOrig
// the bytes it starts with.
const swapTask = "SNAG-1 - A task.md"

var swapOrig = []byte("---\nid: tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1C\nkey: SNAG-1\ntitle: A task\nstatus: open\n---\nBody.\n")

// swapDir makes a folder holding swapTask with data and opens it: the
// Dir (closed at the test's end), the folder, and the file's path.
func swapDir(t *testing.T, data []byte) (d *Dir, dir, p string) {
	t.Helper()
	dir = t.TempDir()
	p = filepath.Join(dir, swapTask)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, dir, p
}

// needExchange skips a test of what an atomic exchange displaces where a
// swap is none (off Linux, Update renames), and fails it in CI, which
// runs on Linux: there it must run.
func needExchange(t testing.TB) {
	t.Helper()
	if runtime.GOOS == "linux" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI runs on Linux, where a swap is an atomic exchange; this is %s", runtime.GOOS)
	}
	t.Skip("a swap displaces the file only where it is an atomic exchange (Linux's renameat2); elsewhere Update renames")
}

// A person's save that lands after Update checked the file and before it
// swapped the new bytes in is not lost: the swap hands it back, and the
// edit is applied to it.
func TestUpdateKeepsASaveThatLandsJustBeforeTheSwap(t *testing.T) {
	needExchange(t)
	name, orig := swapTask, swapOrig
	d, dir, _ := swapDir(t, orig)
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

// S7: two saves race one swap. The first lands after Update checked the
// file and before the swap; the second lands after the swap and before
// Update swaps the first back, made from the bytes it found there (snag's
// own). Neither save's line may be lost: the newest save stays in place
// with the edit applied to it, and the first is handed over as displaced,
// with the bytes it was made on, for the caller to merge.
func TestS7_SavesEitherSideOfTheSwapAreBothKept(t *testing.T) {
	needExchange(t)
	name, orig := swapTask, swapOrig
	d, dir, p := swapDir(t, orig)
	save := func(line string) []byte {
		cur, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		next := append(cur, line...)
		tmp := filepath.Join(dir, ".editor-save")
		if err := os.WriteFile(tmp, next, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
		return next
	}
	var first []byte
	checked, renamed := 0, 0
	d.OnStep(func(step string) error {
		switch {
		case step == StepChecked && checked == 0:
			checked++
			first = save("The first line.\n")
		case step == StepRenamed && renamed == 0:
			renamed++
			save("The second line.\n")
		}
		return nil
	})
	var handed []*Displaced
	d.OnDisplaced(func(x *Displaced) { handed = append(handed, x) })
	claim := func(cur []byte) ([]byte, error) {
		return bytes.Replace(cur, []byte("status: open"), []byte("status: claimed"), 1), nil
	}
	if _, _, err := d.Update(name, claim); err != nil {
		t.Fatal(err)
	}
	disk, _ := os.ReadFile(p)
	if !bytes.Contains(disk, []byte("The second line.\n")) || !bytes.Contains(disk, []byte("status: claimed")) {
		t.Errorf("the file holds\n%s\nwant the newest save with the edit applied", disk)
	}
	var kept *Displaced
	for _, x := range handed {
		b, _, err := d.ReadDisplaced(x)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(b, first) {
			kept = x
		}
	}
	if kept == nil {
		t.Fatalf("the first save (%q) is neither in place nor handed over: %d files handed over", first, len(handed))
	}
	if !bytes.Equal(kept.Base, orig) {
		t.Errorf("the first save is handed over with base\n%s\nwant the bytes it was made on\n%s", kept.Base, orig)
	}
	merged, err := codec.Merge(kept.Base, disk, first)
	if err != nil {
		t.Fatalf("merging the first save back: %v", err)
	}
	for _, line := range []string{"The first line.\n", "The second line.\n", "status: claimed\n"} {
		if !bytes.Contains(merged, []byte(line)) {
			t.Errorf("the merge lacks %q:\n%s", line, merged)
		}
	}
	for _, x := range handed {
		d.Discard(x)
	}
	if temps, _ := d.Temps(0); len(temps) != 0 {
		t.Errorf("temp files left: %v", temps)
	}
}

// S7: a file that an editor replaces again and again, by temp file and
// rename, is always read whole: a save landing while snag opens the file
// is read again, never an error the caller has to make sense of.
func TestS7_ReadWhileSavesReplaceTheFile(t *testing.T) {
	name, body := swapTask, swapOrig
	d, dir, p := swapDir(t, body)
	stop := make(chan struct{})
	saved := make(chan error, 1)
	go func() {
		tmp := filepath.Join(dir, ".editor-save")
		for {
			select {
			case <-stop:
				saved <- nil
				return
			default:
			}
			if err := os.WriteFile(tmp, body, 0o644); err != nil {
				saved <- err
				return
			}
			if err := os.Rename(tmp, p); err != nil {
				saved <- err
				return
			}
		}
	}()
	failed := 0
	for range 20000 {
		got, _, err := d.Read(name)
		if err != nil || !bytes.Equal(got, body) {
			if failed++; failed <= 3 {
				t.Errorf("read while the file is replaced: %q, %v", got, err)
			}
		}
	}
	close(stop)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if failed > 0 {
		t.Errorf("%d of 20000 reads failed", failed)
	}
}

// S7: an editor saving in place truncates the file and then writes it. A
// rewrite that starts in between waits for the person's bytes and makes
// its edit on them, instead of on an empty file.
func TestS7_UpdateWaitsOutATruncatingSave(t *testing.T) {
	name := swapTask
	body := append(bytes.Clone(swapOrig), "A line the person added.\n"...)
	d, _, p := swapDir(t, nil) // truncated, not yet written
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() {
		time.Sleep(3 * time.Millisecond) // the save writes a moment after it truncated, as an editor's does
		_, err := f.Write(body)
		written <- errors.Join(err, f.Close())
	}()
	_, got, err := d.Update(name, func(cur []byte) ([]byte, error) {
		if len(cur) == 0 {
			return nil, errors.New("edit made on an empty file")
		}
		return bytes.Replace(cur, []byte("status: open"), []byte("status: claimed"), 1), nil
	})
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Replace(body, []byte("status: open"), []byte("status: claimed"), 1); !bytes.Equal(got, want) {
		t.Errorf("Update wrote\n%s\nwant\n%s", got, want)
	}
}
