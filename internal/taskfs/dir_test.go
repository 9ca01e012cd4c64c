package taskfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/taskgen"
)

// project makes a .snag/tasks folder in a temp dir and opens it. It returns
// the Dir and the temp dir (the parent of .snag).
func project(t *testing.T) (*taskfs.Dir, string) {
	t.Helper()
	root := t.TempDir()
	tasks := filepath.Join(root, ".snag", "tasks")
	if err := os.MkdirAll(tasks, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := taskfs.OpenDir(tasks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, root
}

// write puts a file at path, failing the test when it cannot.
func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// filesUnder lists every non-folder entry under root, relative to it.
func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !de.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// noTemps fails the test when a snag temp file is left in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.HasSuffix(de.Name(), taskfs.TempSuffix) {
			t.Errorf("temp file left behind: %s", de.Name())
		}
	}
}

// newTask is a task file for key n with the given title.
func newTask(n int, title string) []byte {
	return codec.Format(&queue.Task{ID: queue.NewID(time.Now()), Key: queue.Alias(n), Title: title,
		Status: queue.StatusInbox, Trust: queue.TrustUnvetted, Severity: queue.SeverityLow, Kind: queue.KindBug,
		Wave: 1, Body: []byte("body\n")})
}

// TestX7_HostileCreate: every hostile title becomes a file inside
// .snag/tasks and nowhere else, and Create never overwrites a file.
func TestX7_HostileCreate(t *testing.T) {
	d, root := project(t)
	var want []string
	for i, tt := range taskgen.HostileTitles {
		n := i + 1
		name := queue.FileName(queue.Alias(n), tt.Title)
		title := tt.Title
		if strings.TrimSpace(title) == "" || !validTitle(title) {
			title = "t" // the file's name comes from the title; its content need not
		}
		data := newTask(n, title)
		if err := d.Create(name, data); err != nil {
			t.Errorf("%s: Create(%q): %v", tt.Name, name, err)
			continue
		}
		want = append(want, ".snag/tasks/"+name)
		got, _, err := d.Read(name)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: Read(%q) = %q, %v", tt.Name, name, got, err)
		}

		other := []byte("---\nsomething else\n---\n")
		err = d.Create(name, other)
		if !errors.Is(err, fs.ErrExist) {
			t.Errorf("%s: second Create(%q) = %v, want an error wrapping fs.ErrExist", tt.Name, name, err)
		}
		if got, _, _ := d.Read(name); !bytes.Equal(got, data) {
			t.Errorf("%s: second Create changed the file to %q", tt.Name, got)
		}
	}
	// Raw names, not made by FileName, must not reach outside either.
	for _, name := range []string{"../escape.md", "../../escape.md", "/tmp/escape.md", `..\escape.md`,
		"sub/escape.md", "escape\x00.md", "..", ".", "", strings.Repeat("long", 100) + ".md"} {
		if err := d.Create(name, []byte("x")); err == nil {
			t.Errorf("Create(%q) succeeded", name)
		}
	}
	noTemps(t, d.Path())
	if _, err := os.Stat(filepath.Join(os.TempDir(), "escape.md")); err == nil {
		t.Error("a file escaped to the system temp dir")
	}
	got := filesUnder(t, root)
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files under the project (-want +got):\n%s", diff)
	}
}

// validTitle reports whether Parse would take s as a title.
func validTitle(s string) bool {
	_, err := codec.Parse(codec.Format(&queue.Task{ID: testID, Key: "SNAG-1", Title: s, Status: queue.StatusOpen,
		Trust: queue.TrustVetted, Severity: queue.SeverityLow, Kind: queue.KindBug}))
	return err == nil
}

func TestDir_CreateDoesNotFollowSymlinks(t *testing.T) {
	d, root := project(t)
	outside := filepath.Join(root, "outside.md")
	name := "SNAG-1 - x.md"
	if err := os.Symlink(outside, filepath.Join(d.Path(), name)); err != nil {
		t.Fatal(err)
	}
	err := d.Create(name, []byte("secret plan"))
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over a dangling symlink = %v, want fs.ErrExist", err)
	}
	if _, err := os.Lstat(outside); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Create wrote through the symlink: %v", err)
	}
	noTemps(t, d.Path())
}

// TestX8_Symlinks: a symlinked tasks folder is refused; a symlinked task
// file is listed with ErrSymlink and never read; a folder named like a task
// is flagged.
func TestX8_Symlinks(t *testing.T) {
	root := t.TempDir()
	secret := []byte("TOKEN=hunter2 and not a task\n")
	secretPath := filepath.Join(root, "secret.md")
	write(t, secretPath, secret)

	t.Run("tasks folder is a symlink", func(t *testing.T) {
		real := filepath.Join(root, "real-tasks")
		if err := os.Mkdir(real, 0o755); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(root, "tasks-link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		d, err := taskfs.OpenDir(link)
		if err == nil {
			d.Close()
			t.Fatal("OpenDir followed a symlinked folder")
		}
		if !errors.Is(err, taskfs.ErrSymlink) {
			t.Errorf("OpenDir = %v, want ErrSymlink", err)
		}
	})

	t.Run("not a folder", func(t *testing.T) {
		if _, err := taskfs.OpenDir(secretPath); err == nil || !strings.Contains(err.Error(), "not a folder") {
			t.Errorf("OpenDir(file) = %v", err)
		}
		if _, err := taskfs.OpenDir(filepath.Join(root, "missing")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("OpenDir(missing) = %v, want fs.ErrNotExist", err)
		}
	})

	d, _ := project(t)
	dir := d.Path()
	real := newTask(1, "A real task")
	write(t, filepath.Join(dir, "SNAG-1 - A real task.md"), real)
	links := map[string]string{
		"SNAG-2 - Link outside.md":   secretPath,
		"SNAG-3 - Relative link.md":  "../../secret.md",
		"SNAG-4 - Link inside.md":    "SNAG-1 - A real task.md",
		"SNAG-5 - Dangling link.md":  filepath.Join(root, "nowhere.md"),
		"SNAG-6 - Link to folder.md": "/",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "SNAG-7 - A folder.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "SNAG-7 - A folder.md", "SNAG-8 - Nested.md"), newTask(8, "Nested"))

	entries, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		switch {
		case e.Problem == nil:
			got[e.Name] = "ok"
			if e.Size != int64(len(real)) || e.ModTime.IsZero() {
				t.Errorf("%s: size %d, mtime %v", e.Name, e.Size, e.ModTime)
			}
		case errors.Is(e.Problem, taskfs.ErrSymlink):
			got[e.Name] = "symlink"
		default:
			got[e.Name] = e.Problem.Error()
		}
	}
	want := map[string]string{
		"SNAG-1 - A real task.md":    "ok",
		"SNAG-2 - Link outside.md":   "symlink",
		"SNAG-3 - Relative link.md":  "symlink",
		"SNAG-4 - Link inside.md":    "symlink",
		"SNAG-5 - Dangling link.md":  "symlink",
		"SNAG-6 - Link to folder.md": "symlink",
		"SNAG-7 - A folder.md":       "is a folder: task files live flat in .snag/tasks/; move its files up and remove it",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	for name := range links {
		data, fi, err := d.Read(name)
		if !errors.Is(err, taskfs.ErrSymlink) {
			t.Errorf("Read(%q) = %v, want ErrSymlink", name, err)
		}
		if data != nil || fi != nil {
			t.Errorf("Read(%q) returned data or info for a symlink", name)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Read(%q) error shows the target's bytes: %v", name, err)
		}
		_, _, err = d.Update(name, func(cur []byte) ([]byte, error) {
			t.Errorf("Update(%q) called edit with %q", name, cur)
			return cur, nil
		})
		if !errors.Is(err, taskfs.ErrSymlink) {
			t.Errorf("Update(%q) = %v, want ErrSymlink", name, err)
		}
	}
	if _, _, err := d.Read("SNAG-7 - A folder.md"); err == nil {
		t.Error("Read of a folder succeeded")
	}
	for _, name := range []string{"SNAG-7 - A folder.md/SNAG-8 - Nested.md", "../../secret.md", "/etc/passwd"} {
		if data, _, err := d.Read(name); err == nil {
			t.Errorf("Read(%q) = %q, want it refused", name, data)
		}
	}
	if b := readFile(t, secretPath); !bytes.Equal(b, secret) {
		t.Errorf("the symlink target changed: %q", b)
	}
}

func TestDir_ReadLimit(t *testing.T) {
	d, _ := project(t)
	name := "SNAG-1 - Huge.md"
	huge := append([]byte("---\n"+minimal+"---\n"), bytes.Repeat([]byte("0123456789abcdef\n"), (10<<20)/17)...)
	write(t, filepath.Join(d.Path(), name), huge)
	data, fi, err := d.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != queue.MaxFileSize+1 || fi.Size() != int64(len(huge)) {
		t.Errorf("Read returned %d bytes (size %d), want %d", len(data), fi.Size(), queue.MaxFileSize+1)
	}
	_, err = codec.Parse(data)
	if pe := asParseError(t, err); !strings.Contains(pe.Msg, "1 MiB limit") {
		t.Errorf("Parse of a huge file: %v", err)
	}
}

// TestDir_UpdateReappliesEdit: a person saves the file while snag edits it;
// snag sees the new bytes before its rename, edits those instead, and both
// changes are in the result.
func TestDir_UpdateReappliesEdit(t *testing.T) {
	d, _ := project(t)
	name := "SNAG-1 - A task.md"
	path := filepath.Join(d.Path(), name)
	orig := []byte("---\n" + minimal + "---\nThe body.\n")
	write(t, path, orig)
	personLine := "A line the person added while snag was claiming.\n"
	var person []byte

	calls := 0
	old, got, err := d.Update(name, func(cur []byte) ([]byte, error) {
		calls++
		if calls == 1 {
			person = append(bytes.Clone(cur), personLine...)
			write(t, path, person) // the person saves meanwhile
		}
		return codec.Edit(cur, codec.Set("status", queue.StatusClaimed), codec.Set("assignee", "VESPER"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("edit called %d times, want 2", calls)
	}
	want := "---\n" + strings.Replace(minimal, "open", "claimed", 1) + "assignee: VESPER\n---\nThe body.\n" + personLine
	if diff := cmp.Diff(want, string(readFile(t, path))); diff != "" {
		t.Errorf("file after Update (-want +got):\n%s", diff)
	}
	if !bytes.Equal(old, person) || string(got) != want {
		t.Errorf("Update returned old %q, new %q", old, got)
	}
	noTemps(t, d.Path())
}

func TestDir_UpdateGivesUpOnAFileThatKeepsChanging(t *testing.T) {
	d, _ := project(t)
	name := "SNAG-1 - A task.md"
	path := filepath.Join(d.Path(), name)
	write(t, path, []byte("---\n"+minimal+"---\n"))
	calls := 0
	var last []byte
	_, _, err := d.Update(name, func(cur []byte) ([]byte, error) {
		calls++
		last = append(bytes.Clone(cur), fmt.Sprintf("save %d\n", calls)...)
		write(t, path, last)
		return codec.Edit(cur, codec.Set("status", queue.StatusClaimed))
	})
	if !errors.Is(err, taskfs.ErrChanged) {
		t.Fatalf("Update = %v, want ErrChanged", err)
	}
	if got := readFile(t, path); !bytes.Equal(got, last) {
		t.Errorf("Update overwrote the person's last save:\n%s", cmp.Diff(string(last), string(got)))
	}
	noTemps(t, d.Path())
}

func TestDir_Update(t *testing.T) {
	d, _ := project(t)
	name := "SNAG-1 - A task.md"
	path := filepath.Join(d.Path(), name)
	orig := []byte("---\n" + minimal + "---\n")
	write(t, path, orig)
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("no change writes nothing", func(t *testing.T) {
		before, _ := os.Stat(path)
		old, got, err := d.Update(name, func(cur []byte) ([]byte, error) {
			return codec.Edit(cur, codec.Set("status", queue.StatusOpen))
		})
		if err != nil || !bytes.Equal(old, orig) || !bytes.Equal(got, orig) {
			t.Errorf("Update = %q, %q, %v", old, got, err)
		}
		after, _ := os.Stat(path)
		if !os.SameFile(before, after) {
			t.Error("an edit that changed nothing replaced the file")
		}
	})

	t.Run("edit error leaves the file", func(t *testing.T) {
		boom := errors.New("boom")
		_, _, err := d.Update(name, func([]byte) ([]byte, error) { return nil, boom })
		if !errors.Is(err, boom) {
			t.Errorf("Update = %v, want boom", err)
		}
		if got := readFile(t, path); !bytes.Equal(got, orig) {
			t.Errorf("file changed to %q", got)
		}
	})

	t.Run("change keeps the mode", func(t *testing.T) {
		_, got, err := d.Update(name, func(cur []byte) ([]byte, error) {
			return codec.Edit(cur, codec.Set("status", queue.StatusClaimed))
		})
		if err != nil {
			t.Fatal(err)
		}
		if disk := readFile(t, path); !bytes.Equal(disk, got) || !strings.Contains(string(disk), "status: claimed") {
			t.Errorf("file = %q, Update returned %q", disk, got)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
		}
	})

	t.Run("missing file", func(t *testing.T) {
		_, _, err := d.Update("SNAG-9 - gone.md", func(cur []byte) ([]byte, error) { return cur, nil })
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Update = %v, want fs.ErrNotExist", err)
		}
	})
	noTemps(t, d.Path())
}

func TestDir_WriteAndNoTemps(t *testing.T) {
	d, root := project(t)
	snag, err := taskfs.OpenDir(filepath.Join(root, ".snag"))
	if err != nil {
		t.Fatal(err)
	}
	defer snag.Close()
	for i, content := range []string{"{\"version\": 1}\n", "{\"version\": 1, \"tasks\": []}\n"} {
		if err := snag.Write("plan.json", []byte(content)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		if got := readFile(t, filepath.Join(root, ".snag", "plan.json")); string(got) != content {
			t.Errorf("plan.json = %q, want %q", got, content)
		}
	}
	if err := snag.Write("../plan.json", []byte("x")); err == nil {
		t.Error("Write outside the folder succeeded")
	}
	if err := d.Create("SNAG-1 - x.md", newTask(1, "x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Update("SNAG-1 - x.md", func(cur []byte) ([]byte, error) {
		return codec.Edit(cur, codec.Set("status", queue.StatusOpen))
	}); err != nil {
		t.Fatal(err)
	}
	if err := snag.Remove("plan.json"); err != nil {
		t.Fatal(err)
	}
	noTemps(t, d.Path())
	noTemps(t, snag.Path())
	want := []string{".snag/tasks/SNAG-1 - x.md"}
	if diff := cmp.Diff(want, filesUnder(t, root)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestDir_SweepTemps(t *testing.T) {
	d, _ := project(t)
	dir := d.Path()
	old := time.Now().Add(-2 * time.Hour)
	files := map[string]bool{ // name: old
		".SNAG-1 - a.md.0a1b2c3d4e5f" + taskfs.TempSuffix: true,  // swept
		".SNAG-2 - b.md.0a1b2c3d4e5f" + taskfs.TempSuffix: false, // too young
		"SNAG-3 - c.md":                     true,
		"notes" + taskfs.TempSuffix + ".md": true,
		".SNAG-4 - d.md.swp":                true,
	}
	for name, isOld := range files {
		p := filepath.Join(dir, name)
		write(t, p, []byte("x"))
		if isOld {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	folder := filepath.Join(dir, ".folder"+taskfs.TempSuffix)
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(folder, old, old); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(dir), ".outside.md.0a1b2c3d4e5f"+taskfs.TempSuffix)
	write(t, outside, []byte("x"))
	if err := os.Chtimes(outside, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, ".link"+taskfs.TempSuffix)); err != nil {
		t.Fatal(err)
	}

	n, err := d.SweepTemps(time.Hour, nil)
	if err != nil || n != 1 {
		t.Errorf("SweepTemps = %d, %v; want 1", n, err)
	}
	des, _ := os.ReadDir(dir)
	var got []string
	for _, de := range des {
		got = append(got, de.Name())
	}
	want := []string{
		".SNAG-2 - b.md.0a1b2c3d4e5f" + taskfs.TempSuffix,
		".SNAG-4 - d.md.swp",
		".folder" + taskfs.TempSuffix,
		".link" + taskfs.TempSuffix,
		"SNAG-3 - c.md",
		"notes" + taskfs.TempSuffix + ".md",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("left after SweepTemps (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("SweepTemps removed a file outside its folder: %v", err)
	}
}

// A Dir whose folder is replaced (removed and made again, or swapped by two
// renames) works on the new folder, and says so while none is there.
func TestDirFollowsAReplacedFolder(t *testing.T) {
	for _, how := range []string{"remove", "swap"} {
		t.Run(how, func(t *testing.T) {
			parent := t.TempDir()
			path := filepath.Join(parent, "tasks")
			os.Mkdir(path, 0o755)
			os.WriteFile(filepath.Join(path, "SNAG-1 - a.md"), []byte("one\n"), 0o644)
			d, err := taskfs.OpenDir(path)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			switch how {
			case "remove":
				os.RemoveAll(path)
				if _, err := d.List(); !errors.Is(err, taskfs.ErrFolderGone) {
					t.Errorf("List with the folder gone: %v; want taskfs.ErrFolderGone", err)
				}
				if err := d.Create("SNAG-2 - b.md", []byte("two\n")); !errors.Is(err, taskfs.ErrFolderGone) {
					t.Errorf("Create with the folder gone: %v; want taskfs.ErrFolderGone", err)
				}
				os.Mkdir(path, 0o755)
				os.WriteFile(filepath.Join(path, "SNAG-1 - a.md"), []byte("one again\n"), 0o644)
			case "swap":
				os.Mkdir(path+".new", 0o755)
				os.WriteFile(filepath.Join(path+".new", "SNAG-1 - a.md"), []byte("one again\n"), 0o644)
				os.Rename(path, path+".old")
				os.Rename(path+".new", path)
			}
			if b, _, err := d.Read("SNAG-1 - a.md"); err != nil || string(b) != "one again\n" {
				t.Errorf("Read after the replace: %q, %v; want the new folder's file", b, err)
			}
			if err := d.Create("SNAG-2 - b.md", []byte("two\n")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := d.Update("SNAG-1 - a.md", func(cur []byte) ([]byte, error) { return append(cur, "edited\n"...), nil }); err != nil {
				t.Fatal(err)
			}
			es, err := d.List()
			if err != nil || len(es) != 2 {
				t.Errorf("List after the replace: %v, %v; want two files", es, err)
			}
			if b, _ := os.ReadFile(filepath.Join(path, "SNAG-1 - a.md")); string(b) != "one again\nedited\n" {
				t.Errorf("the new folder's file holds %q", b)
			}
			if d.Reopens() != 1 {
				t.Errorf("Reopens() = %d; want 1", d.Reopens())
			}
		})
	}
}

// TestS7_TheSweepKeepsASaveInADisplacedFile: a crash right after a
// rewrite's swap leaves the file it displaced under the temp's name. The
// sweep at the next start removes it when it holds snag's bytes (the file
// before the rewrite, or the rewrite's own) or nothing, and hands it to
// keep when a person's save landed in it; it is removed (and not counted)
// only once keep has taken it.
func TestS7_TheSweepKeepsASaveInADisplacedFile(t *testing.T) {
	taskfs.NeedExchange(t)
	d, _ := project(t)
	const name = "SNAG-1 - a.md"
	path := filepath.Join(d.Path(), name)
	crash := errors.New("crash")
	// displace rewrites the file and stops right after its swap, as a
	// SIGKILL would, and returns the temp file left: the displaced file.
	displace := func(next string) string {
		t.Helper()
		d.OnStep(func(step string) error {
			if step == taskfs.StepRenamed {
				return crash
			}
			return nil
		})
		defer d.OnStep(nil)
		if _, _, err := d.Update(name, func([]byte) ([]byte, error) { return []byte(next), nil }); !errors.Is(err, crash) {
			t.Fatalf("Update: %v; want the step's error", err)
		}
		temps, _ := filepath.Glob(filepath.Join(d.Path(), ".*"+taskfs.TempSuffix))
		if len(temps) != 1 {
			t.Fatalf("temp files after the swap: %q; want the displaced one", temps)
		}
		return temps[0]
	}
	var kept []taskfs.Leftover
	keep := func(l taskfs.Leftover) error { kept = append(kept, l); return nil }
	sweep := func(keep func(taskfs.Leftover) error, want int) {
		t.Helper()
		if n, err := d.SweepTemps(0, keep); err != nil || n != want {
			t.Errorf("SweepTemps = %d, %v; want %d removed", n, err, want)
		}
	}

	write(t, path, []byte("v1\n"))
	displace("v2\n") // holds v1, the bytes the rewrite was made on
	sweep(keep, 1)

	tmp := displace("v3\n")
	write(t, tmp, []byte("v3\n")) // the rewrite's own bytes
	sweep(keep, 1)

	tmp = displace("v4\n")
	write(t, tmp, nil) // a crash before anything was written
	sweep(keep, 1)
	if len(kept) > 0 {
		t.Fatalf("kept %+v; want nothing kept of snag's own bytes", kept)
	}

	tmp = displace("v5\n")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("a person's line\n") // a save in place into the file they had open
	f.Close()
	sweep(func(taskfs.Leftover) error { return crash }, 0)
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the save was removed though keep failed: %v", err)
	}
	sweep(keep, 0)
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the save is still in the temp file after keep took it: %v", err)
	}
	want := []taskfs.Leftover{{Name: name, Temp: filepath.Base(tmp), Data: []byte("v4\na person's line\n")}}
	if diff := cmp.Diff(want, kept); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(path); string(b) != "v5\n" {
		t.Errorf("the task file holds %q; want the rewrite's v5", b)
	}
}

// readFile reads the file at path, failing the test when it cannot.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const testID = "tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y"

// minimal is the four required keys of a task file, as its lines 2 to 5.
const minimal = "id: " + testID + "\nkey: SNAG-1\ntitle: A task\nstatus: open\n"

// asParseError is err as the codec's *codec.ParseError, failing the test
// when it is not one.
func asParseError(t testing.TB, err error) *codec.ParseError {
	t.Helper()
	var pe *codec.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *codec.ParseError", err, err)
	}
	return pe
}
