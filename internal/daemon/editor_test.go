package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// An editor saves new bytes over a file the way a real editor does: the
// same system calls in the same order, with the same side files (droppings)
// made and cleaned up. Between steps it pauses longer than the watcher's
// quiet time, so snagd gets to look at every state in between, as it would
// on a slow disk or a busy machine. The snagd it saves under has a settle
// time of editorSettle.
type editor struct {
	name string
	save func(t *testing.T, path string, data []byte)
}

// editors are the editors snag is tested against (TESTPLAN, Harness).
var editors = []editor{
	{"vim", vimSave},
	{"jetbrains", jetbrainsSave},
	{"emacs", emacsSave},
	{"vscode", vscodeSave},
	{"atomic", atomicSave},
}

// editorPause is the time between two steps of a save: more than the
// watcher's quiet time (50 ms), so snagd gets to look at the states in
// between.
const editorPause = 70 * time.Millisecond

// editorSettle is the settle time (snagd --settle) of the snagd the
// editors save under: how long a file that reads as missing or broken is
// left before snagd believes it. A save's steps must all fall within it; at
// the default (300 ms) three pauses of a loaded machine can outlast it, so
// the tests widen it instead of hoping the pauses stay short.
const editorSettle = 2 * time.Second

// vimSave is vim 9 with its defaults ('writebackup', 'backupcopy=auto',
// 'swapfile'): the swap file .name.swp is there all along; vim probes that
// it may create files in the folder with 4913, renames the original to the
// backup name~, writes the new file under the old name, and removes the
// backup.
func vimSave(t *testing.T, path string, data []byte) {
	t.Helper()
	dir, name := filepath.Split(path)
	swap := filepath.Join(dir, "."+name+".swp")
	mustWrite(t, swap, []byte("b0VIM 9.1\x00 swap of "+name), os.O_CREATE|os.O_EXCL|os.O_WRONLY)
	defer mustRemove(t, swap)
	time.Sleep(editorPause)
	probe := filepath.Join(dir, "4913")
	mustWrite(t, probe, nil, os.O_CREATE|os.O_EXCL|os.O_WRONLY)
	mustRemove(t, probe)
	backup := path + "~"
	mustRename(t, path, backup)
	time.Sleep(editorPause)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(editorPause)
	mustDo(t, writeAll(f, data))
	mustDo(t, f.Sync())
	mustDo(t, f.Close())
	mustWrite(t, swap, []byte("b0VIM 9.1\x00 swap of "+name+" after the write"), os.O_TRUNC|os.O_WRONLY)
	time.Sleep(editorPause)
	mustRemove(t, backup)
	time.Sleep(editorPause)
}

// jetbrainsSave is a JetBrains IDE's "safe write": the new bytes go to
// name___jb_tmp___, the original is renamed to name___jb_old___, the temp
// file is renamed into place, and the old one is removed.
func jetbrainsSave(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp, old := path+"___jb_tmp___", path+"___jb_old___"
	mustWrite(t, tmp, data, os.O_CREATE|os.O_EXCL|os.O_WRONLY)
	time.Sleep(editorPause)
	mustRename(t, path, old)
	time.Sleep(editorPause)
	mustRename(t, tmp, path)
	time.Sleep(editorPause)
	mustRemove(t, old)
	time.Sleep(editorPause)
}

// emacsSave is emacs with its defaults: once the buffer is modified it
// locks the file with .#name, a symbolic link to user@host.pid that points
// nowhere, and auto-saves to #name#; the first save of a session renames
// the original to the backup name~ (which stays) and writes the new file;
// then the auto-save file and the lock go.
func emacsSave(t *testing.T, path string, data []byte) {
	t.Helper()
	dir, name := filepath.Split(path)
	lock := filepath.Join(dir, ".#"+name)
	if err := os.Symlink("dana@laptop.4242:1732712345", lock); err != nil {
		t.Fatal(err)
	}
	autosave := filepath.Join(dir, "#"+name+"#")
	mustWrite(t, autosave, data, os.O_CREATE|os.O_TRUNC|os.O_WRONLY)
	time.Sleep(editorPause)
	backup := path + "~"
	os.Remove(backup) // an older backup is replaced
	mustRename(t, path, backup)
	time.Sleep(editorPause)
	mustWrite(t, path, data, os.O_CREATE|os.O_EXCL|os.O_WRONLY)
	time.Sleep(editorPause)
	mustRemove(t, autosave)
	mustRemove(t, lock)
	time.Sleep(editorPause)
}

// vscodeSave is VS Code: it truncates the file and writes it in place, here
// in two halves with a pause between, so snagd can read the empty file and
// the half file.
func vscodeSave(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(editorPause)
	mustDo(t, writeAll(f, data[:len(data)/2]))
	time.Sleep(editorPause)
	mustDo(t, writeAll(f, data[len(data)/2:]))
	mustDo(t, f.Close())
	time.Sleep(editorPause)
}

// atomicSave is the careful tool's save: a temp file beside the target,
// synced, renamed over it.
func atomicSave(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	mustWrite(t, tmp, data, os.O_CREATE|os.O_EXCL|os.O_WRONLY)
	time.Sleep(editorPause)
	mustRename(t, tmp, path)
	time.Sleep(editorPause)
}

// isDropping reports whether a name in tasks/ is an editor's or a tool's
// side file, by DESIGN 7's list, written out here on its own so the test
// does not trust the code it checks.
func isDropping(name string) bool {
	switch {
	case strings.HasSuffix(name, ".swp"), strings.HasSuffix(name, "~"), name == "4913",
		strings.HasPrefix(name, ".#"), strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#"),
		strings.Contains(name, "___jb_") && strings.HasSuffix(name, "___"),
		strings.HasSuffix(name, ".tmp"), strings.HasSuffix(name, taskfs.TempSuffix):
		return true
	}
	return false
}

// TestEditorDroppingsAreNotTaskFiles: every side file an editor leaves in
// tasks/ is refused by the rule that decides what snag reads, even the
// emacs lock, whose name ends in .md.
func TestEditorDroppingsAreNotTaskFiles(t *testing.T) {
	t.Parallel()
	const name = "SNAG-11 - Login form clears the email.md"
	for _, drop := range []string{
		"." + name + ".swp", "." + name + ".swx", "4913", name + "~", ".#" + name, "#" + name + "#",
		name + "___jb_tmp___", name + "___jb_old___", name + ".tmp", "." + name + ".1f2e3d" + taskfs.TempSuffix,
	} {
		if queue.IsTaskFileName(drop) {
			t.Errorf("IsTaskFileName(%q) = true; an editor's dropping must never be read as a task", drop)
		}
	}
	if !queue.IsTaskFileName(name) {
		t.Errorf("IsTaskFileName(%q) = false", name)
	}
}

func writeAll(f *os.File, b []byte) error {
	_, err := f.Write(b)
	return err
}

func mustWrite(t *testing.T, path string, data []byte, flag int) {
	t.Helper()
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, writeAll(f, data))
	mustDo(t, f.Close())
}

func mustRename(t *testing.T, from, to string) {
	t.Helper()
	mustDo(t, os.Rename(from, to))
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	mustDo(t, os.Remove(path))
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
