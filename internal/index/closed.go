package index

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/snagdev/snag/internal/taskfs"
)

// ClosedSuffix names the file beside a database, snag.db-closed, in which
// its last clean [DB.Close] recorded the stamps (size, modification time,
// inode and change time) of the database file and its write-ahead log.
const ClosedSuffix = "-closed"

// closedRecord is what a clean Close leaves in the -closed file: the
// stamps of the database and of its WAL ("none" when there is none).
func closedRecord(path string) ([]byte, error) {
	var b bytes.Buffer
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && p != path:
			b.WriteString("none\n")
			continue
		case err != nil:
			return nil, err
		}
		s := taskfs.StampOf(fi)
		if s.Inode == 0 || s.Change == 0 {
			return nil, errors.New("no inode or change time: cannot tell a later write")
		}
		fmt.Fprintf(&b, "%d %d %d %d\n", s.Size, s.ModTime, s.Inode, s.Change)
	}
	return b.Bytes(), nil
}

// recordClosed writes the -closed file of a database just closed cleanly.
// A failure only costs the next start a quick check, so it is not
// reported; the record is removed rather than left out of date.
func recordClosed(path string) {
	rec, err := closedRecord(path)
	if err == nil {
		tmp := path + ClosedSuffix + ".snag-tmp"
		if err = os.WriteFile(tmp, rec, 0o644); err == nil {
			if err = os.Rename(tmp, path+ClosedSuffix); err != nil {
				os.Remove(tmp)
			}
		}
	}
	if err != nil {
		os.Remove(path + ClosedSuffix)
	}
}

// Untouched reports whether the database file at path and its WAL are
// exactly as the last clean [DB.Close] of a DB on them left them: the
// stamps that Close recorded are the files' stamps now. The kernel moves a
// file's change time on every write, truncate, rename and chmod, and no
// program can set it back, so a file untouched since then was not written
// by anyone: not damaged by a crash (it was closed), nor patched, copied
// over, truncated or replaced while nothing had it open. Where the system
// keeps no change time or inode (Windows) it is never untouched.
func Untouched(path string) bool {
	rec, err := os.ReadFile(path + ClosedSuffix)
	if err != nil {
		return false
	}
	now, err := closedRecord(path)
	return err == nil && bytes.Equal(rec, now)
}
