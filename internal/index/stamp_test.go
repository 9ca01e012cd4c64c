package index_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/taskfs"
)

// stat returns a file's stamp.
func (e *env) stamp(name string) taskfs.Stamp {
	e.t.Helper()
	fi, err := os.Lstat(filepath.Join(e.folder, name))
	if err != nil {
		e.t.Fatal(err)
	}
	return taskfs.StampOf(fi)
}

// sameSize rewrites a file's text with old replaced by new, which must be
// as long, the way the editor named by how saves it, and sets the file's
// modification time back to what it was: size and time alone cannot tell
// the file changed. It returns the file's stamps before and after.
func (e *env) sameSize(name, old, new, how string) (before, after taskfs.Stamp) {
	e.t.Helper()
	if len(old) != len(new) {
		e.t.Fatalf("%q and %q differ in length", old, new)
	}
	p := filepath.Join(e.folder, name)
	raw, err := os.ReadFile(p)
	if err != nil {
		e.t.Fatal(err)
	}
	next := strings.Replace(string(raw), old, new, 1)
	if next == string(raw) {
		e.t.Fatalf("%s has no %q", name, old)
	}
	before = e.stamp(name)
	mtime := time.Unix(0, before.ModTime)
	switch how {
	case "in place": // truncate and write the same inode (VS Code, vim's backupcopy=yes)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := f.WriteString(next); err != nil {
			e.t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			e.t.Fatal(err)
		}
	case "rename over": // a temp file renamed onto the name (atomic saves, git checkout)
		tmp := filepath.Join(e.folder, ".save.tmp")
		if err := os.WriteFile(tmp, []byte(next), 0o644); err != nil {
			e.t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			e.t.Fatal(err)
		}
	default:
		e.t.Fatalf("no save %q", how)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		e.t.Fatal(err)
	}
	after = e.stamp(name)
	if after.Size != before.Size || after.ModTime != before.ModTime {
		e.t.Fatalf("the save changed size or time (%+v -> %+v): the test does not reach its state", before, after)
	}
	return before, after
}

// TestScanSkipsFilesByStamp: a scan reads only the files whose stamp is not
// the one indexed. A file rewritten in place or renamed over with the same
// size and its old modification time is read (its change time, and for a
// rename its inode, differ); a touched file is read and found unchanged;
// the rest are not read at all.
func TestScanSkipsFilesByStamp(t *testing.T) {
	defer index.SetStampMargin(0)() // trust the stamps of files written a moment ago
	e := newEnv(t)
	a := e.put(task(1, "Checkout button broken"))
	b := e.put(task(2, "Basket badge lags"))
	c := e.put(task(3, "Coupon message vanishes"))
	e.put(task(4, "Search is slow"))
	if st := e.scan(); st.Read != 4 || st.Added != 4 {
		t.Fatalf("first scan: %+v; want 4 files read and added", st)
	}
	if st := e.scan(); st.Read != 0 || st.Unchanged != 4 {
		t.Fatalf("second scan: %+v; want nothing read", st)
	}

	inPlaceBefore, inPlaceAfter := e.sameSize(a, "Checkout button broken", "Checkout button BROKEN", "in place")
	if inPlaceBefore.Inode != inPlaceAfter.Inode {
		t.Logf("the in-place write changed the inode (%d -> %d)", inPlaceBefore.Inode, inPlaceAfter.Inode)
	}
	_, renamed := e.sameSize(b, "Basket badge lags", "Basket badge LAGS", "rename over")
	now := time.Now()
	if err := os.Chtimes(filepath.Join(e.folder, c), now, now); err != nil {
		t.Fatal(err)
	}
	st := e.scan()
	if st.Read != 3 || st.Updated != 2 || st.Unchanged != 2 {
		t.Errorf("scan after two same-size saves and a touch: %+v; want 3 read, 2 updated", st)
	}
	for ref, want := range map[string]string{"SNAG-1": "Checkout button BROKEN", "SNAG-2": "Basket badge LAGS",
		"SNAG-3": "Coupon message vanishes", "SNAG-4": "Search is slow"} {
		if got := e.mustGet(ref).Task.Title; got != want {
			t.Errorf("%s: title %q, want %q", ref, got, want)
		}
	}
	if st := e.scan(); st.Read != 0 {
		t.Errorf("scan after the changes were indexed: %+v; want nothing read", st)
	}
	row := query(t, e.conn(), `SELECT ino, ctime FROM tasks WHERE key = 'SNAG-2'`)
	if len(row) != 1 || row[0]["ino"] != int64(renamed.Inode) || row[0]["ctime"] != renamed.Change {
		t.Errorf("SNAG-2's row holds %v; want the renamed file's inode %d and change time %d", row, renamed.Inode, renamed.Change)
	}

	// A hashing scan reads every file whatever its stamp.
	st, err := e.db.Scan(e.ctx, e.dir, index.ScanOptions{Hash: true})
	if err != nil || st.Read != 4 || st.Changed() {
		t.Errorf("hashing scan: %+v, %v; want 4 read, nothing changed", st, err)
	}
}

// TestScanRereadsARacilyCleanFile: a file whose change time is within the
// margin of its read is indexed with a stamp not to trust (ctime 0), and
// read again by the next scan, which finds it unchanged; a write in the
// same tick of the file system's clock as that read can then never hide.
func TestScanRereadsARacilyCleanFile(t *testing.T) {
	defer index.SetStampMargin(time.Hour)()
	e := newEnv(t)
	e.put(task(1, "Checkout button broken"))
	e.put(task(2, "Basket badge lags"))
	if st := e.scan(); st.Read != 2 {
		t.Fatalf("first scan: %+v; want 2 read", st)
	}
	if rows := query(t, e.conn(), `SELECT path FROM tasks WHERE ctime != 0`); len(rows) != 0 {
		t.Errorf("rows with a trusted stamp of files changed within the margin: %v", rows)
	}
	if st := e.scan(); st.Read != 2 || st.Changed() {
		t.Errorf("second scan: %+v; want both read again and nothing changed", st)
	}
	// Once the files are older than the margin, their stamps are trusted.
	index.SetStampMargin(0)
	e.scan()
	if st := e.scan(); st.Read != 0 {
		t.Errorf("scan once the stamps are trusted: %+v; want nothing read", st)
	}
}

// TestSyncFileRecordsATrustedStamp: a file the watcher hands over is read
// whatever its stamp, and the stamp it records lets the next scan skip it.
func TestSyncFileRecordsATrustedStamp(t *testing.T) {
	defer index.SetStampMargin(0)()
	e := newEnv(t)
	name := e.put(task(1, "Checkout button broken"))
	e.scan()
	e.sameSize(name, "broken", "BROKEN", "in place")
	if fc := e.sync(name); !fc.Updated {
		t.Errorf("SyncFile after a same-size save: %+v; want updated", fc)
	}
	if got := e.mustGet("SNAG-1").Task.Title; got != "Checkout button BROKEN" {
		t.Errorf("title %q after SyncFile", got)
	}
	if st := e.scan(); st.Read != 0 {
		t.Errorf("scan after SyncFile: %+v; want nothing read", st)
	}
}
