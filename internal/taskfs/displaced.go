package taskfs

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snagdev/snag/internal/queue"
)

// Displaced is a file that [Dir.Update] swapped out of place, kept under a
// hidden temp name: a program that opened the file before the swap may
// still write into it.
type Displaced struct {
	Name  string // the task file it was
	Temp  string // its name now, in the same folder
	Base  []byte // the bytes it held at the swap, which the edit was made on
	Wrote []byte // the bytes Update put in its place
	// Restored is set when Update swapped a save straight back into place:
	// one made on Seen (the bytes the rewrite's check saw) that slipped in
	// between the check and the swap. For an instant the file held Wrote,
	// and a program that read it then may save from those bytes, without
	// the restored save's lines: the caller watches the file for that and
	// merges them back in (the file under Temp is not the restored save).
	Restored, Seen []byte
	root           *os.Root
}

// OnDisplaced sets the function that takes each file [Dir.Update] swaps
// out of place, instead of removing it at once. The function owns the
// file from then: it must end with [Dir.Discard]. It is called with the
// caller of Update still running, so it must not block. Set it before the
// Dir is shared.
func (d *Dir) OnDisplaced(f func(*Displaced)) { d.displaced = f }

// Writing reports whether a program still has the displaced file open
// for writing. known is false where the system cannot tell (not Linux,
// or a file that is not this user's): the caller then waits for the file
// to stay unchanged instead.
func (d *Dir) Writing(x *Displaced) (writing, known bool) {
	f, err := x.root.OpenFile(x.Temp, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, false
	}
	defer f.Close()
	return openForWriting(f)
}

// ReadDisplaced reads the displaced file as it is now, with its info.
func (d *Dir) ReadDisplaced(x *Displaced) ([]byte, fs.FileInfo, error) {
	f, err := x.root.OpenFile(x.Temp, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, queue.MaxFileSize+1))
	return b, fi, err
}

// Discard removes the displaced file.
func (d *Dir) Discard(x *Displaced) error { return x.root.Remove(x.Temp) }

// errNoExchange says the filesystem cannot swap two files atomically.
var errNoExchange = errors.New("atomic exchange not supported")

// swap puts tmp in place of name. Where the filesystem can exchange the two
// atomically it does, and reports true: tmp then names the displaced file.
// Elsewhere it renames tmp over name.
func swap(root *os.Root, tmp, name string) (exchanged bool, err error) {
	f, err := root.Open(".")
	if err != nil {
		return false, err
	}
	defer f.Close()
	switch err := exchange(f, tmp, name); {
	case err == nil:
		return true, nil
	case !errors.Is(err, errNoExchange):
		return false, err
	}
	return false, root.Rename(tmp, name)
}

// swapBack undoes a swap that displaced a file snag had not seen (a save
// made on base): it exchanges tmp and name again, so that the displaced
// file is back at name and tmp holds what the swap had put there, snag's
// own bytes (mine). Should a newer save have landed at name meanwhile,
// that newest file goes back in place instead, and the one it displaced,
// the save made on base (saved), is what tmp holds. Either way the file
// left under tmp is handed over as displaced (when [Dir.OnDisplaced] is
// set) rather than removed: a program may still be writing into snag's
// bytes, and the save made on base may hold lines the newest one, made
// from snag's bytes, lacks. The caller merges them in. When the save made
// on base is what went back in place, it is named as restored: it may be
// overwritten by a save made from a read of mine.
func (d *Dir) swapBack(root *os.Root, tmp, name string, base, mine, saved []byte) {
	left := base // until the swap back, tmp holds the save made on base
	var restored []byte
	if f, err := root.Open("."); err == nil {
		if exchange(f, tmp, name) == nil {
			left, restored = mine, saved
			if b, err := readTemp(root, tmp); err == nil && !bytes.Equal(b, mine) && exchange(f, tmp, name) == nil {
				left, restored = base, nil // the newest save is back in place
			}
		}
		f.Close()
	}
	if d.displaced == nil {
		root.Remove(tmp)
		return
	}
	x := &Displaced{Name: name, Temp: tmp, Base: left, Wrote: mine, root: root}
	if restored != nil {
		x.Restored, x.Seen = restored, base
	}
	d.displaced(x)
}

// readTemp reads one of snag's temp files, whatever its size.
func readTemp(root *os.Root, name string) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, queue.MaxFileSize+1))
}

// tempStem is the part of a task file's name its temp files start with.
func tempStem(name string) string {
	if len(name) > 100 {
		return name[:100]
	}
	return name
}

// crcTable is the table of tempMark's checksums, made at first use: every
// program that links queue would otherwise build it (32 KiB of tables) at
// start, the snag command that never writes a file among them.
var crcTable = sync.OnceValue(func() *crc64.Table { return crc64.MakeTable(crc64.ECMA) })

// tempMark names a rewrite's two sets of bytes in the name of the temp
// file it writes: the bytes the edit was made on (base) and the bytes it
// writes (next), a 64-bit CRC of each in hex. The swap moves the file it
// displaced under that name, and snagd looks at it there (Displaced); a
// crash before it has, leaves a temp file that holds base or next (snag's
// own bytes, or a file that never went in place), or neither: a person's
// save landed in the displaced file, and [Dir.SweepTemps] keeps it.
func tempMark(base, next []byte) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], crc64.Checksum(base, crcTable()))
	binary.BigEndian.PutUint64(b[8:], crc64.Checksum(next, crcTable()))
	return hex.EncodeToString(b[:])
}

// markOf gives the task file a rewrite's temp file named tmp was written
// for, and the two checksums of its mark (tempMark); ok is false for a
// temp file without one (a new file's, or a whole write's, which displaces
// nothing).
func markOf(tmp string) (name string, base, next uint64, ok bool) {
	rest, _ := strings.CutSuffix(tmp, TempSuffix)
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return "", 0, 0, false
	}
	mark, err := hex.DecodeString(rest[i+1:])
	if err != nil || len(mark) != 16 {
		return "", 0, 0, false
	}
	rest = rest[:i] // "." + the name + "." + the random part
	j := strings.LastIndexByte(rest, '.')
	if j < 1 {
		return "", 0, 0, false
	}
	return rest[1:j], binary.BigEndian.Uint64(mark[:8]), binary.BigEndian.Uint64(mark[8:]), true
}

// Leftover is a temp file a crash left behind that holds bytes snag did
// not write: a person's save in place that landed in a file a rewrite
// had just displaced, before snagd could merge it back.
type Leftover struct {
	Name string // the task file it was displaced from (the first 100 bytes of its name)
	Temp string // the temp file's name, in the same folder
	Data []byte // what it holds
}

// SweepTemps removes snag's temp files older than age, left behind by a
// crash, and reports how many it removed. A temp file that holds a
// person's bytes (a [Leftover]) is handed to keep instead, and removed
// (not counted) only once keep returns nil; with keep nil it is left where
// it is.
func (d *Dir) SweepTemps(age time.Duration, keep func(Leftover) error) (int, error) {
	root, err := d.fresh()
	if err != nil {
		return 0, err
	}
	f, err := root.Open(".")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// The names alone, then a look at the few temp files among them: a
	// start sweeps a folder of 100,000 task files.
	names, err := f.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if !strings.HasSuffix(name, TempSuffix) {
			continue
		}
		fi, err := root.Lstat(name)
		if err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) < age {
			continue
		}
		if task, base, next, ok := markOf(name); ok {
			// A rewrite's: the file it displaced may be under its name.
			data, err := readTemp(root, name)
			if err != nil {
				continue
			}
			sum := crc64.Checksum(data, crcTable())
			if len(data) > 0 && sum != base && sum != next {
				if keep != nil && keep(Leftover{Name: task, Temp: name, Data: data}) == nil {
					root.Remove(name)
				}
				continue
			}
		}
		if root.Remove(name) == nil {
			n++
		}
	}
	return n, nil
}

// writeTemp writes data to a new synced temp file beside name, whose name
// carries mark when it is not empty (see tempMark).
func (d *Dir) writeTemp(root *os.Root, name, mark string, data []byte, perm fs.FileMode) (string, fs.FileInfo, error) {
	if err := checkFlat(name); err != nil {
		return "", nil, err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := "." + tempStem(name) + "." + hex.EncodeToString(rnd[:])
	if mark != "" {
		tmp += "." + mark
	}
	tmp += TempSuffix
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", nil, fmt.Errorf("write %s: %w", name, err)
	}
	werr := d.at(StepTempCreated)
	if werr == nil {
		if _, werr = f.Write(data); werr == nil {
			werr = d.at(StepTempWritten)
		}
	}
	var serr error
	var fi fs.FileInfo
	if werr == nil {
		if serr = f.Sync(); serr == nil {
			serr = d.at(StepTempSynced)
		}
		if serr == nil {
			// The written file's size and time, as a later look at its
			// name finds them: the swap moves the inode, it does not touch it.
			fi, serr = f.Stat()
		}
	}
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		root.Remove(tmp)
		return "", nil, fmt.Errorf("write %s: %w%s", name, err, fixFor(err))
	}
	return tmp, fi, nil
}
