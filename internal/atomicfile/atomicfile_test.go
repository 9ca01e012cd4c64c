package atomicfile_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snagdev/snag/internal/atomicfile"
	"github.com/snagdev/snag/internal/taskfs"
)

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.toml")
	for _, c := range []struct {
		data string
		perm os.FileMode
	}{
		{"first\n", 0o644},
		{"second, longer than the first\n", 0o600},
		{"", 0o640},
	} {
		if err := atomicfile.WriteFile(p, []byte(c.data), c.perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.data {
			t.Errorf("after writing %q the file holds %q", c.data, got)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != c.perm {
			t.Errorf("mode %04o, want %04o", fi.Mode().Perm(), c.perm)
		}
		assertNoTemps(t, dir)
	}
}

func TestWriteFileRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := atomicfile.WriteFile("here.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile("here.txt"); string(got) != "x" {
		t.Errorf("here.txt holds %q", got)
	}
	assertNoTemps(t, ".")
}

// TestWriteFileFailedWriteKeepsOldFile makes the kernel refuse the write
// half way (a file size limit, in a child process so the limit binds only
// it) and checks the file that was there is whole and no temp is left.
func TestWriteFileFailedWriteKeepsOldFile(t *testing.T) {
	if p := os.Getenv("ATOMICFILE_CHILD"); p != "" {
		signal.Ignore(syscall.SIGXFSZ)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 4096, Max: 4096}); err != nil {
			t.Fatal(err)
		}
		err := atomicfile.WriteFile(p, []byte(strings.Repeat("new ", 4096)), 0o644)
		if !errors.Is(err, syscall.EFBIG) {
			t.Fatalf("WriteFile over the size limit: %v, want EFBIG", err)
		}
		return
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "approved.json")
	old := "old bytes\n"
	if err := atomicfile.WriteFile(p, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFileFailedWriteKeepsOldFile$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ATOMICFILE_CHILD="+p)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != old {
		t.Errorf("after a failed write the file holds %q, want the old %q", got, old)
	}
	assertNoTemps(t, dir)
}

// TestWriteFileFailedRenameLeavesNoTemp replaces a folder, which rename
// refuses after the temp is written.
func TestWriteFileFailedRenameLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "taken")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "inside"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := atomicfile.WriteFile(p, []byte("data"), 0o644)
	if err == nil {
		t.Fatal("WriteFile over a folder succeeded")
	}
	if !strings.HasPrefix(err.Error(), "write "+p+": ") {
		t.Errorf("error %q does not name the file", err)
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		t.Errorf("the folder at %s is gone: %v", p, err)
	}
	assertNoTemps(t, dir)
}

func TestWriteFileMissingFolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "such", "file")
	if err := atomicfile.WriteFile(p, []byte("x"), 0o644); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("WriteFile into a missing folder: %v, want fs.ErrNotExist", err)
	}
}

// TestTempNamesAreSnags checks the temp files are ones the task folder's
// reader and the project's .gitignore already pass over.
func TestTempNamesAreSnags(t *testing.T) {
	if atomicfile.TempSuffix != taskfs.TempSuffix {
		t.Errorf("atomicfile.TempSuffix %q, taskfs.TempSuffix %q: one .gitignore line must cover both", atomicfile.TempSuffix, taskfs.TempSuffix)
	}
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), atomicfile.TempSuffix) {
			t.Errorf("temp file %s left in %s", e.Name(), dir)
		}
	}
}

// TestCreateNeverReplaces: Create puts a new file in place whole, with
// its mode, and refuses (fs.ErrExist) where a file is, leaving it as it
// was; no temp file is left either way.
func TestCreateNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "N-7 Use FTS5.md")
	if err := atomicfile.Create(p, []byte("first\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "first\n" {
		t.Errorf("created file holds %q", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %04o, want 0640", fi.Mode().Perm())
	}
	if err := atomicfile.Create(p, []byte("second\n"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over a file = %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "first\n" {
		t.Errorf("a refused Create changed the file: %q", got)
	}
	assertNoTemps(t, dir)
}

// TestReplaceIfKeepsAChangedFile: ReplaceIf replaces a file that holds
// what the change was made from, and refuses (ErrChanged) one that a
// person saved meanwhile, which keeps their bytes.
func TestReplaceIfKeepsAChangedFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.md")
	if err := os.WriteFile(p, []byte("v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.ReplaceIf(p, []byte("v1\n"), []byte("v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("a person's save\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.ReplaceIf(p, []byte("v2\n"), []byte("v3\n"), 0o644); !errors.Is(err, atomicfile.ErrChanged) {
		t.Errorf("ReplaceIf over a changed file = %v, want ErrChanged", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "a person's save\n" {
		t.Errorf("the person's save was replaced: %q", got)
	}
	assertNoTemps(t, dir)
}
