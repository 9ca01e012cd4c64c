package taskfs

import (
	"io/fs"
	"time"
)

// A Stamp is what a file's metadata says about its content without reading
// it: its size, modification time, inode number and status change time.
// The kernel sets the change time on every write, rename and chmod, and no
// program can set it back, so a file whose stamp equals the one recorded
// when its bytes were read still has those bytes, unless the change time
// was too close to that read to tell one write from the next: see
// [Stamp.Trusted].
type Stamp struct {
	Size    int64
	ModTime int64  // unix nanoseconds
	Change  int64  // unix nanoseconds; 0 where the system gives none
	Inode   uint64 // 0 where the system gives none
}

// StampOf reads a stamp from a file's info (from Stat, Lstat or a folder
// listing). Where the system gives no inode or change time (Windows), they
// are 0 and the stamp is never trusted.
func StampOf(fi fs.FileInfo) Stamp {
	s := Stamp{Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}
	s.Inode, s.Change = inodeAndChange(fi)
	return s
}

// StampMargin is how long after a file's last change its stamp is trusted:
// a write within the same tick of the file system's clock leaves the times
// as they were (coarse kernel ticks are milliseconds; FAT's modification
// time counts in 2 s), so a file changed less than this before its bytes
// were read is read again next time, as git does with a racily clean file.
const StampMargin = 2 * time.Second

// Trusted reports whether the stamp, taken of a file just before its bytes
// were read, can later stand for those bytes: the file has an inode and a
// change time, and both its change and its modification time are before
// horizon, the time of the read less [StampMargin]. A write after the read
// then gives the file a later change time, whatever the clock's tick.
func (s Stamp) Trusted(horizon time.Time) bool {
	h := horizon.UnixNano()
	return s.Inode != 0 && s.Change != 0 && s.Change < h && s.ModTime < h
}
