package taskfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snagdev/snag/internal/queue"
)

// TempSuffix ends the name of every temp file snag writes. A temp file is
// hidden (its name starts with a dot) so no reader mistakes it for a task.
const TempSuffix = ".snag-tmp"

// ErrSymlink is returned for a task file, or a folder, that is a symbolic
// link: snag never follows one.
var ErrSymlink = errors.New("is a symbolic link: snag does not follow links in .snag/; replace it with the real file")

// ErrChanged is returned by [Dir.Update] when the file kept changing under
// snag while it tried to write.
var ErrChanged = errors.New("file kept changing while snag wrote it: try again when the editor has saved")

// Dir is one flat folder of snag's files (.snag/tasks, or .snag itself),
// opened through [os.Root] so that no name can reach outside it. It refuses
// symbolic links, creates files without ever overwriting one, and makes
// every write atomic and durable: a temp file in the same folder, fsync,
// rename, fsync of the folder.
//
// A folder can be replaced under a running program: a git checkout of a
// branch without it and back, rm -rf and a restore, a swap by two renames.
// A Dir notices: before each list and write, and when a read finds no
// file, it compares the folder at its path with the one it has open, and
// opens the new one when they differ. While the path holds no folder, its
// operations fail with an error wrapping [ErrFolderGone].
//
// A Dir is safe for concurrent use; writers to the same file should be
// serialised by the caller (snagd is the one writer).
type Dir struct {
	root atomic.Pointer[os.Root]
	path string
	step func(step string) error
	// displaced, when set, takes the files Update swaps out of place.
	displaced func(*Displaced)

	mu      sync.Mutex // serialises reopening
	retired *os.Root   // the folder opened before the current one, closed at the next reopen
	reopens atomic.Int64
	// folders holds, per *os.Root, the folder opened as an *os.File for its
	// descriptor (reads on Linux); it is closed with its root.
	folders sync.Map
}

// closeRoot closes a folder and the file of it that reads use.
func (d *Dir) closeRoot(root *os.Root) error {
	if f, ok := d.folders.LoadAndDelete(root); ok {
		f.(*os.File).Close()
	}
	return root.Close()
}

// ErrFolderGone is wrapped by the errors of a Dir whose path no longer
// holds a folder.
var ErrFolderGone = errors.New("the folder is gone")

// The steps of a write, as [Dir.OnStep] names them, in order. A new file
// is linked into place and its temp file removed; a rewrite is renamed.
const (
	StepTempCreated = "temp-created" // the temp file exists, empty
	StepTempWritten = "temp-written" // the new bytes are in the temp file
	StepTempSynced  = "temp-synced"  // and on disk
	StepChecked     = "checked"      // a rewrite found the file as it expected, just before the swap
	StepRenamed     = "renamed"      // the temp file replaced the file
	StepLinked      = "linked"       // a new file is in place beside its temp file
	StepTempRemoved = "temp-removed" // the temp file of a new file is gone
	StepDirSynced   = "dir-synced"   // the folder's entries are on disk
)

// OnStep sets a function called after each step of every write (the Step
// constants), for crash tests: it may end the process there, or return an
// error that the write then fails with, as if the step had failed (a temp
// file is removed, the file keeps its old bytes). Set it before the Dir is
// shared; nil, the default, costs nothing.
func (d *Dir) OnStep(f func(step string) error) { d.step = f }

// at reports that a step is done, and returns the error a hook injects.
func (d *Dir) at(step string) error {
	if d.step == nil {
		return nil
	}
	return d.step(step)
}

// OpenDir opens the folder at path. The folder itself must not be a
// symbolic link.
func OpenDir(path string) (*Dir, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("open %s: %w", path, ErrSymlink)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open %s: not a folder", path)
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d := &Dir{path: path}
	d.root.Store(root)
	return d, nil
}

// Close releases the folder.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.retired != nil {
		d.closeRoot(d.retired)
		d.retired = nil
	}
	return d.closeRoot(d.root.Load())
}

// Reopens counts the times the Dir found its folder replaced and opened
// the new one.
func (d *Dir) Reopens() int64 { return d.reopens.Load() }

// Fresh makes sure the Dir has open the folder that is at its path now,
// opening it again when it was replaced, and reports whether it did. It
// fails with an error wrapping [ErrFolderGone] (and [fs.ErrNotExist]) when
// the path holds no folder.
func (d *Dir) Fresh() (reopened bool, err error) {
	fi, err := os.Lstat(d.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("%s: %w (a git checkout of a branch without it?): restore it, or run snag init to make an empty one: %w", d.path, ErrFolderGone, fs.ErrNotExist)
	case err != nil:
		return false, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return false, fmt.Errorf("%s: %w", d.path, ErrSymlink)
	case !fi.IsDir():
		return false, fmt.Errorf("%s: %w: a file took its place: move it away and restore the folder", d.path, ErrFolderGone)
	}
	if cur, err := d.root.Load().Stat("."); err == nil && os.SameFile(fi, cur) {
		return false, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, err := d.root.Load().Stat("."); err == nil && os.SameFile(fi, cur) {
		return false, nil // another caller reopened it meanwhile
	}
	root, err := os.OpenRoot(d.path)
	if err != nil {
		return false, fmt.Errorf("reopen %s: %w", d.path, err)
	}
	if now, err := root.Stat("."); err != nil || !os.SameFile(fi, now) {
		root.Close()
		return false, fmt.Errorf("reopen %s: replaced again while opening: try again", d.path)
	}
	// The folder opened before is kept until the next reopen: a write that
	// began on it a moment ago still finishes there, and fails cleanly.
	if d.retired != nil {
		d.closeRoot(d.retired)
	}
	d.retired = d.root.Swap(root)
	d.reopens.Add(1)
	return true, nil
}

// fresh is Fresh for the start of an operation: it returns the folder to
// use.
func (d *Dir) fresh() (*os.Root, error) {
	if _, err := d.Fresh(); err != nil {
		return nil, err
	}
	return d.root.Load(), nil
}

// Path is the folder's path as it was opened.
func (d *Dir) Path() string { return d.path }

// Entry is one name in a Dir, as [Dir.List] found it.
type Entry struct {
	Name    string
	Size    int64
	ModTime time.Time
	// Stamp is the file's size, times and inode as the listing found them.
	Stamp Stamp
	// Problem is set when the entry is named like a task file but cannot be
	// one: a symbolic link, or a folder.
	Problem error
}

// List returns the entries whose names [IsTaskFileName] accepts, in
// directory order.
func (d *Dir) List() ([]Entry, error) {
	f, err := d.openForList()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, err := listStat(f)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.path, err)
	}
	return out, nil
}

// The problems of entries named like task files that cannot be one.
var (
	errFolder     = errors.New("is a folder: task files live flat in .snag/tasks/; move its files up and remove it")
	errNotRegular = errors.New("is not a regular file")
)

// listInfo lists the task files of the open folder f through
// os.File.ReadDir and the info of each entry.
func listInfo(f *os.File) ([]Entry, error) {
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if !queue.IsTaskFileName(name) {
			continue
		}
		e := Entry{Name: name}
		switch {
		case de.Type()&fs.ModeSymlink != 0:
			e.Problem = ErrSymlink
		case de.IsDir():
			e.Problem = errFolder
		case !de.Type().IsRegular():
			e.Problem = errNotRegular
		default:
			fi, err := de.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while we listed
			}
			if err != nil {
				e.Problem = err
			} else {
				e.Size, e.ModTime, e.Stamp = fi.Size(), fi.ModTime(), StampOf(fi)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// openForList opens the folder as it is at its path now (following a
// replaced one), to read its entries.
func (d *Dir) openForList() (*os.File, error) {
	root, err := d.fresh()
	if err != nil {
		return nil, fmt.Errorf("list %w", err)
	}
	f, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.path, err)
	}
	return f, nil
}

// Read returns a file's bytes and its info. It refuses symbolic links and
// folders, and reads at most queue.MaxFileSize+1 bytes, so an oversized file costs
// little and still fails [Parse]'s size rule.
func (d *Dir) Read(name string) ([]byte, fs.FileInfo, error) {
	data, fi, err := d.read(d.root.Load(), name)
	if err == nil {
		// The file read is the one at the path, unless the folder was
		// replaced by one that has the name too (a swap by two renames).
		if pfi, perr := os.Lstat(filepath.Join(d.path, name)); perr != nil || sameFile(pfi, fi) {
			return data, fi, nil
		}
	}
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		// No such file, or the folder was replaced: look in the folder
		// that is at the path now.
		if reopened, ferr := d.Fresh(); ferr != nil {
			if err == nil {
				return data, fi, nil
			}
			return nil, nil, errors.Join(err, ferr)
		} else if reopened {
			return d.read(d.root.Load(), name)
		}
	}
	return data, fi, err
}

func (d *Dir) read(root *os.Root, name string) ([]byte, fs.FileInfo, error) {
	if err := checkFlat(name); err != nil {
		return nil, nil, err
	}
	// A save that replaces the file between the look at the name and the
	// open is read again: the name is looked at first so that a link is
	// never followed, nor a FIFO waited on.
	for range readTries {
		data, fi, err := d.readOnce(root, name)
		if !errors.Is(err, errReplaced) {
			return data, fi, err
		}
	}
	return nil, nil, fmt.Errorf("read %s: %w", name, ErrChanged)
}

// readTries is how often read looks again at a file replaced while it
// was being opened.
const readTries = 10

// errReplaced says the file at the name was replaced while being opened.
var errReplaced = errors.New("replaced while opening")

// Create writes a new file. It never overwrites: when name exists it fails
// with an error wrapping [fs.ErrExist]. The file appears whole or not at all.
func (d *Dir) Create(name string, data []byte) error {
	root, err := d.fresh()
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	tmp, _, err := d.writeTemp(root, name, "", data, 0o644)
	if err != nil {
		return err
	}
	defer root.Remove(tmp)
	if err := root.Link(tmp, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w: snag never overwrites a task file", name, fs.ErrExist)
		}
		return fmt.Errorf("create %s: %w", name, err)
	}
	if err := d.at(StepLinked); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if err := root.Remove(tmp); err != nil {
		return fmt.Errorf("create %s: remove temp: %w", name, err)
	}
	if err := d.at(StepTempRemoved); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	return d.syncDir(root)
}

// Update rewrites an existing file with edit(current bytes). Just before it
// puts the new bytes in place it checks that the file still holds the bytes
// the edit was made on; when a person saved meanwhile, it applies edit again
// to their bytes, so their edit is never overwritten. The new bytes go in by
// an atomic swap with the file (on Linux), which hands back what was there
// at that instant: a save that slipped in between the check and the swap is
// caught too, and edit is applied to it. It returns the bytes the edit was
// applied to and the bytes it wrote; when edit returns its input unchanged
// nothing is written.
//
// A program that opened the file before the swap and writes after it (an
// editor saving in place, a script appending) writes into the displaced
// file. Update cannot see that write coming; with [Dir.OnDisplaced] set it
// hands the displaced file over instead of removing it, for the caller to
// look at again once it is quiet.
func (d *Dir) Update(name string, edit func(cur []byte) ([]byte, error)) (old, new []byte, err error) {
	w, err := d.Rewrite(name, edit)
	return w.Old, w.New, err
}

// Rewritten is what [Dir.Rewrite] did: the bytes the edit was applied to,
// the bytes it wrote, and the written file's info (nil when nothing was
// written, as the edit changed nothing).
type Rewritten struct {
	Old, New []byte
	Info     fs.FileInfo
}

// Rewrite is [Dir.Update], and says also what the written file's size and
// modification time are, so the caller can index the bytes it wrote
// without reading them back. It is [Dir.Prepare], [Prepared.Put] and
// [Dir.Sync] in one call.
func (d *Dir) Rewrite(name string, edit func(cur []byte) ([]byte, error)) (Rewritten, error) {
	return d.RewriteWithin(name, edit, updateTries)
}

// RewriteWithin is [Dir.Rewrite] that meets the file changing under it
// at most tries times before it gives up with [ErrChanged] (Rewrite gives
// it 20). A caller that will try again later itself, and holds others up
// while it tries, gives it few.
func (d *Dir) RewriteWithin(name string, edit func(cur []byte) ([]byte, error), tries int) (Rewritten, error) {
	p, err := d.Prepare(name, edit)
	if err != nil {
		return p.old(), err
	}
	w, err := p.put(tries)
	if err != nil || w.Info == nil {
		return w, err
	}
	return w, d.Sync(p)
}

// Prepared is a rewrite of one file made ready: the edit applied to the
// file's bytes and the new bytes written to a temp file beside it and
// synced, nothing in place yet. [Dir.Prepare] makes it without holding
// anything, so that writers of different files can write and sync their
// temp files side by side; [Prepared.Put] then checks the file and swaps
// the new bytes in (callers serialise that step, as they serialise writes
// to one file), and [Dir.Sync] makes the swaps of a batch durable with one
// sync of the folder. A Prepared not put must be dropped with
// [Prepared.Abandon].
type Prepared struct {
	d    *Dir
	root *os.Root
	name string
	edit func(cur []byte) ([]byte, error)
	base []byte      // what the file held when the edit was made
	fi   fs.FileInfo // its info then
	next []byte      // the edit's bytes (base itself when it changed nothing)
	tmp  string      // the temp file holding next, "" when none is written
	wfi  fs.FileInfo // the temp file's info
}

// Prepare reads the file, applies edit to its bytes and writes the result
// to a synced temp file in the folder. When edit returns its input
// unchanged nothing is written and Put will do nothing. On an error of
// edit the Prepared it returns still says what the file held.
func (d *Dir) Prepare(name string, edit func(cur []byte) ([]byte, error)) (*Prepared, error) {
	root, err := d.fresh()
	if err != nil {
		return nil, fmt.Errorf("update %s: %w", name, err)
	}
	p := &Prepared{d: d, root: root, name: name, edit: edit}
	if p.base, p.fi, err = d.readWhole(root, name); err != nil {
		return nil, err
	}
	return p, p.write()
}

// readWhole reads a file that is to be rewritten. An editor saving in
// place truncates the file and then writes it: a file found empty is
// read again after a moment, a few times, before it is taken to be empty,
// so that the edit is made on the person's bytes and not on the instant
// between their truncate and their write.
func (d *Dir) readWhole(root *os.Root, name string) ([]byte, fs.FileInfo, error) {
	for try := 0; ; try++ {
		data, fi, err := d.read(root, name)
		if err != nil || len(data) > 0 || try == emptyTries {
			return data, fi, err
		}
		time.Sleep(time.Millisecond << try)
	}
}

// emptyTries is how often readWhole reads an empty file again (waiting
// 1, 2, 4, 8 and 16 ms).
const emptyTries = 5

// write applies the edit to base and writes a temp file of its bytes.
func (p *Prepared) write() error {
	next, err := p.edit(p.base)
	if err != nil {
		return err
	}
	p.next = next
	if bytes.Equal(next, p.base) {
		return nil
	}
	p.tmp, p.wfi, err = p.d.writeTemp(p.root, p.name, tempMark(p.base, next), next, p.fi.Mode().Perm())
	return err
}

// old is what a failed rewrite reports: the bytes the edit was applied to.
func (p *Prepared) old() Rewritten {
	if p == nil {
		return Rewritten{}
	}
	return Rewritten{Old: p.base}
}

// Abandon removes the temp file of a rewrite that will not be put.
func (p *Prepared) Abandon() {
	if p != nil && p.tmp != "" {
		p.root.Remove(p.tmp)
		p.tmp = ""
	}
}

// Put puts the prepared bytes in place of the file. Just before, it checks
// that the file still holds the bytes the edit was made on; when a person
// saved meanwhile, it applies the edit again to their bytes (and writes
// and syncs a new temp file), so their edit is never overwritten. The new
// bytes go in by an atomic swap with the file (on Linux), which hands back
// what was there at that instant: a save that slipped in between the check
// and the swap is caught too, and the edit is applied to it. It does not
// sync the folder: [Dir.Sync] does, once for a batch of Puts, before any
// of them is reported done.
func (p *Prepared) Put() (Rewritten, error) { return p.put(updateTries) }

func (p *Prepared) put(tries int) (Rewritten, error) {
	d, root, name := p.d, p.root, p.name
	// A file that changes under the write is tried again from its new
	// bytes, read after a short random pause, so that a program writing it
	// every few milliseconds does not meet every try.
	for try := range tries {
		if try > 0 {
			time.Sleep(time.Duration(mrand.Int64N(int64(time.Millisecond) << min(try, 3))))
			var err error
			if p.base, p.fi, err = d.readWhole(root, name); err != nil {
				return Rewritten{Old: p.base}, err
			}
			if err := p.write(); err != nil {
				p.Abandon()
				return Rewritten{Old: p.base}, err
			}
		}
		base, next, tmp, wfi := p.base, p.next, p.tmp, p.wfi
		if tmp == "" { // the edit changed nothing
			return Rewritten{Old: base, New: base}, nil
		}
		again, _, err := d.read(root, name)
		if err != nil {
			p.Abandon()
			return Rewritten{Old: base}, err
		}
		if !bytes.Equal(again, base) {
			p.Abandon()
			continue
		}
		if err := d.at(StepChecked); err != nil {
			p.Abandon()
			return Rewritten{Old: base}, fmt.Errorf("update %s: %w", name, err)
		}
		exchanged, err := swap(root, tmp, name)
		if err != nil {
			p.Abandon()
			return Rewritten{Old: base}, fmt.Errorf("update %s: %w", name, err)
		}
		p.tmp = "" // in place; under tmp is now the displaced file, or nothing
		if err := d.at(StepRenamed); err != nil {
			return Rewritten{Old: base, New: next, Info: wfi}, fmt.Errorf("update %s: %w", name, err)
		}
		if exchanged {
			// tmp now names the file that was displaced. If it is not what
			// the check saw, a person saved in between (or is writing into
			// it in place right now): swap it straight back, so their file
			// is where they left it, and start again from their bytes.
			if displaced, err := readTemp(root, tmp); err == nil && !bytes.Equal(displaced, base) {
				d.swapBack(root, tmp, name, base, next, displaced)
				continue
			}
			if d.displaced != nil {
				d.displaced(&Displaced{Name: name, Temp: tmp, Base: base, Wrote: next, root: root})
			} else {
				root.Remove(tmp)
			}
		}
		return Rewritten{Old: base, New: next, Info: wfi}, nil
	}
	return Rewritten{Old: p.base}, fmt.Errorf("update %s: %w", name, ErrChanged)
}

// Sync makes the swaps of the rewrites ps durable: one sync of each folder
// they were put in (the folder this Dir has open, unless it was replaced
// meanwhile).
func (d *Dir) Sync(ps ...*Prepared) error {
	var done []*os.Root
	for _, p := range ps {
		if p == nil || slices.Contains(done, p.root) {
			continue
		}
		done = append(done, p.root)
		if err := d.syncDir(p.root); err != nil {
			return err
		}
	}
	return nil
}

// updateTries is how often Update writes a file that keeps changing
// before it gives up with ErrChanged.
const updateTries = 20

// Write replaces a generated file (plan.json) atomically. It is not for task
// files, which go through [Dir.Create] and [Dir.Update].
func (d *Dir) Write(name string, data []byte) error {
	root, err := d.fresh()
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	tmp, _, err := d.writeTemp(root, name, "", data, 0o644)
	if err != nil {
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		root.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := d.at(StepRenamed); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return d.syncDir(root)
}

// Rename gives the file old the name new, which must not exist: it is
// linked under new, then old is removed, so it is never overwritten and
// never gone. The folder is synced after.
func (d *Dir) Rename(old, new string) error {
	root := d.root.Load()
	if err := root.Link(old, new); err != nil {
		return fmt.Errorf("rename %s to %s: %w", old, new, err)
	}
	if err := root.Remove(old); err != nil {
		return fmt.Errorf("rename %s to %s: remove %s: %w", old, new, old, err)
	}
	return d.syncDir(root)
}

// Remove deletes a file; it is for generated files and tests, never for
// task files.
func (d *Dir) Remove(name string) error { return d.root.Load().Remove(name) }

// fixFor names the fix for a write that failed for want of room.
func fixFor(err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return " (free some space on that disk and try again; the file was not changed)"
	}
	return ""
}

func (d *Dir) syncDir(root *os.Root) error {
	f, err := root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", d.path, err)
	}
	if err := d.at(StepDirSynced); err != nil {
		return fmt.Errorf("sync %s: %w", d.path, err)
	}
	return nil
}

// checkFlat refuses a name that is not a plain name in this folder.
func checkFlat(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("%q is not a file name in this folder", queue.Truncate(name, 80))
	}
	return nil
}

// Temps lists snag's temp files older than age, without removing them.
func (d *Dir) Temps(age time.Duration) ([]string, error) {
	root, err := d.fresh()
	if err != nil {
		return nil, err
	}
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), TempSuffix) || !de.Type().IsRegular() {
			continue
		}
		if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) >= age {
			out = append(out, de.Name())
		}
	}
	return out, nil
}
