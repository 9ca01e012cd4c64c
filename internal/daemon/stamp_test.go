package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snagd "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/watch"
)

// waitStampsTrusted waits until every task file of root last changed more
// than taskfs.StampMargin ago, so that the stamps snagd records when it
// reads them are trusted (a file changed just before its read is read
// again at the next scan whatever its stamp).
func waitStampsTrusted(t *testing.T, root string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, ".snag", "tasks", "*.md"))
	var latest int64
	for _, f := range files {
		fi, err := os.Lstat(f)
		if err != nil {
			t.Fatal(err)
		}
		if s := taskfs.StampOf(fi); s.Change > latest {
			latest = s.Change
		} else if s.Change == 0 {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s has no change time: CI's file system must give one", f)
			}
			t.Skip("no change times here: every scan reads every file")
		}
	}
	time.Sleep(time.Until(time.Unix(0, latest).Add(taskfs.StampMargin + 100*time.Millisecond)))
}

// sameSizeSave replaces old with new (as long) in a task file the way how
// names, then sets the file's modification time back to what it was: by
// size and time the file is the one snagd indexed. how is "in place" (an
// editor that truncates and writes the same inode), "rename over" (an
// atomic save) or "unlink and create" (git checkout, which may get the
// freed inode number back).
func sameSizeSave(t *testing.T, path, old, new, how string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	next := strings.Replace(string(raw), old, new, 1)
	if len(old) != len(new) || next == string(raw) {
		t.Fatalf("%s: cannot replace %q with %q of the same length", path, old, new)
	}
	before, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "in place":
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		mustDo(t, writeAll(f, []byte(next)))
		mustDo(t, f.Close())
	case "rename over":
		tmp := filepath.Join(filepath.Dir(path), ".save.tmp")
		mustDo(t, os.WriteFile(tmp, []byte(next), 0o644))
		mustDo(t, os.Rename(tmp, path))
	case "unlink and create":
		mustDo(t, os.Remove(path))
		mustDo(t, os.WriteFile(path, []byte(next), 0o644))
	default:
		t.Fatalf("no save %q", how)
	}
	mustDo(t, os.Chtimes(path, before.ModTime(), before.ModTime()))
	after, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("%s: the save changed size or time: the test does not reach its state", path)
	}
}

// titleOf is a task's title through the API.
func (d *daemon) titleOf(ref string) string {
	d.t.Helper()
	var v struct{ Task struct{ Title string } }
	if code := d.get("/tasks/"+ref, &v); code != 200 {
		d.t.Fatalf("GET /tasks/%s: %d", ref, code)
	}
	return v.Task.Title
}

// sameSizeSaves are three saves, by the three ways files are replaced,
// that keep each file's size and (set back) modification time.
var sameSizeSaves = []struct{ ref, file, old, new, how string }{
	{"SNAG-11", sampleName, "Login form clears", "Login form CLEARS", "in place"},
	{"SNAG-1", "SNAG-1 - Checkout button does nothing on Safari.md", "does nothing", "does NOTHING", "rename over"},
	{"SNAG-4", "SNAG-4 - Basket badge count lags one item behind.md", "lags one item", "LAGS one item", "unlink and create"},
}

// TestW16_SameSizeSavesWhileDownSeenAtStart: while snagd is down, three
// task files are saved (in place, renamed over, unlinked and created again)
// with their size and modification time as they were. The next snagd trusts
// the stamps of the files nobody touched and reads none of them, but reads
// these three (their change times, and for two of them their inodes,
// differ) and serves their new titles.
func TestW16_SameSizeSavesWhileDownSeenAtStart(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	waitStampsTrusted(t, root)
	d := startInProcess(t, root, "", snagd.Options{})
	for _, s := range sameSizeSaves {
		if got := d.titleOf(s.ref); !strings.Contains(got, s.old) {
			t.Fatalf("%s before: %q", s.ref, got)
		}
	}
	d.terminate()
	tasks := filepath.Join(root, ".snag", "tasks")
	for _, s := range sameSizeSaves {
		sameSizeSave(t, filepath.Join(tasks, s.file), s.old, s.new, s.how)
	}

	d2 := startInProcess(t, root, d.home, snagd.Options{})
	for _, s := range sameSizeSaves {
		if got := d2.titleOf(s.ref); !strings.Contains(got, s.new) {
			t.Errorf("%s after a same-size save %s while snagd was down: title %q; want it with %q", s.ref, s.how, got, s.new)
		}
	}
	var start string
	for line := range strings.SplitSeq(d2.log.String(), "\n") {
		if strings.Contains(line, "msg=rescan") && strings.Contains(line, "reasons=[start]") {
			start = line
		}
	}
	if want := fmt.Sprintf("read=%d ", len(sameSizeSaves)); !strings.Contains(start, want) {
		t.Errorf("the start-up rescan: %q; want %s(the saved files, and no other)", start, want)
	}
}

// TestW16_SameSizeSaveWithNoEventSeenByRescan: a save that makes no event
// (through a hard link outside the watched folders), keeps the file's size
// and sets its modification time back is found by the periodic rescan,
// which reads the file because its change time moved.
func TestW16_SameSizeSaveWithNoEventSeenByRescan(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	waitStampsTrusted(t, root)
	d := startInProcess(t, root, "", snagd.Options{Watch: watch.Options{Rescan: time.Second}})
	iv := newInvariants(t, d)
	p := filepath.Join(d.root, ".snag", "tasks", sampleName)
	link := filepath.Join(d.root, "elsewhere", "linked.md")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Link(p, link); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("a hard link in the test's temp folder: %v", err)
		}
		t.Skipf("no hard links here: %v", err)
	}
	sameSizeSave(t, link, "Login form clears", "Login form CLEARS", "in place")
	eventually(t, "the unseen same-size save indexed", func() bool {
		return strings.Contains(d.titleOf("SNAG-11"), "Login form CLEARS")
	})
	mustRemove(t, link)
	iv.final()
}
