package queue

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"
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
// A Dir is safe for concurrent use; writers to the same file should be
// serialised by the caller (snagd is the one writer).
type Dir struct {
	root *os.Root
	path string
	step func(step string) error
}

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
	return &Dir{root: root, path: path}, nil
}

// Close releases the folder.
func (d *Dir) Close() error { return d.root.Close() }

// Path is the folder's path as it was opened.
func (d *Dir) Path() string { return d.path }

// Entry is one name in a Dir, as [Dir.List] found it.
type Entry struct {
	Name    string
	Size    int64
	ModTime time.Time
	// Problem is set when the entry is named like a task file but cannot be
	// one: a symbolic link, or a folder.
	Problem error
}

// List returns the entries whose names [IsTaskFileName] accepts, in
// directory order.
func (d *Dir) List() ([]Entry, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.path, err)
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.path, err)
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if !IsTaskFileName(name) {
			continue
		}
		e := Entry{Name: name}
		switch {
		case de.Type()&fs.ModeSymlink != 0:
			e.Problem = ErrSymlink
		case de.IsDir():
			e.Problem = errors.New("is a folder: task files live flat in .snag/tasks/; move its files up and remove it")
		case !de.Type().IsRegular():
			e.Problem = errors.New("is not a regular file")
		default:
			fi, err := de.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while we listed
			}
			if err != nil {
				e.Problem = err
			} else {
				e.Size, e.ModTime = fi.Size(), fi.ModTime()
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// Read returns a file's bytes and its info. It refuses symbolic links and
// folders, and reads at most MaxFileSize+1 bytes, so an oversized file costs
// little and still fails [Parse]'s size rule.
func (d *Dir) Read(name string) ([]byte, fs.FileInfo, error) {
	if err := checkFlat(name); err != nil {
		return nil, nil, err
	}
	lfi, err := d.root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if lfi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, fmt.Errorf("read %s: %w", name, ErrSymlink)
	}
	if !lfi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("read %s: not a regular file", name)
	}
	f, err := d.root.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !os.SameFile(lfi, fi) {
		return nil, nil, fmt.Errorf("read %s: replaced while opening: try again", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, fi, nil
}

// Create writes a new file. It never overwrites: when name exists it fails
// with an error wrapping [fs.ErrExist]. The file appears whole or not at all.
func (d *Dir) Create(name string, data []byte) error {
	tmp, err := d.writeTemp(name, data, 0o644)
	if err != nil {
		return err
	}
	defer d.root.Remove(tmp)
	if err := d.root.Link(tmp, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w: snag never overwrites a task file", name, fs.ErrExist)
		}
		return fmt.Errorf("create %s: %w", name, err)
	}
	if err := d.at(StepLinked); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if err := d.root.Remove(tmp); err != nil {
		return fmt.Errorf("create %s: remove temp: %w", name, err)
	}
	if err := d.at(StepTempRemoved); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	return d.syncDir()
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
func (d *Dir) Update(name string, edit func(cur []byte) ([]byte, error)) (old, new []byte, err error) {
	base, fi, err := d.Read(name)
	if err != nil {
		return nil, nil, err
	}
	// base is what the edit applies to; expect is what the file must hold
	// just before the new bytes go in. They differ only after a swap that
	// displaced a person's save: the file then holds snag's stale write.
	expect := base
	for range 5 {
		next, err := edit(base)
		if err != nil {
			return base, nil, err
		}
		if bytes.Equal(next, base) && bytes.Equal(expect, base) {
			return base, base, nil
		}
		tmp, err := d.writeTemp(name, next, fi.Mode().Perm())
		if err != nil {
			return base, nil, err
		}
		again, fi2, err := d.Read(name)
		if err != nil {
			d.root.Remove(tmp)
			return base, nil, err
		}
		if !bytes.Equal(again, expect) {
			d.root.Remove(tmp)
			base, expect, fi = again, again, fi2
			continue
		}
		if err := d.at(StepChecked); err != nil {
			d.root.Remove(tmp)
			return base, nil, fmt.Errorf("update %s: %w", name, err)
		}
		exchanged, err := d.swap(tmp, name)
		if err != nil {
			d.root.Remove(tmp)
			return base, nil, fmt.Errorf("update %s: %w", name, err)
		}
		if err := d.at(StepRenamed); err != nil {
			return base, next, fmt.Errorf("update %s: %w", name, err)
		}
		if exchanged {
			// tmp now names the file that was displaced. If it is not what
			// the check saw, a person saved in between (or is writing into
			// it in place right now): swap it straight back, so their file
			// is where they left it, and start again from their bytes.
			if displaced, err := d.readTemp(tmp); err == nil && !bytes.Equal(displaced, expect) {
				d.swapBack(tmp, name, next)
				base, fi, err = d.Read(name)
				if err != nil {
					return base, nil, err
				}
				expect = base
				continue
			}
			d.root.Remove(tmp)
		}
		return base, next, d.syncDir()
	}
	return base, nil, fmt.Errorf("update %s: %w", name, ErrChanged)
}

// errNoExchange says the filesystem cannot swap two files atomically.
var errNoExchange = errors.New("atomic exchange not supported")

// swap puts tmp in place of name. Where the filesystem can exchange the two
// atomically it does, and reports true: tmp then names the displaced file.
// Elsewhere it renames tmp over name.
func (d *Dir) swap(tmp, name string) (exchanged bool, err error) {
	f, err := d.root.Open(".")
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
	return false, d.root.Rename(tmp, name)
}

// swapBack undoes a swap that displaced a file snag had not seen: it
// exchanges tmp and name again, so the displaced file is back at name, and
// removes tmp once it holds snag's own bytes (mine). Should a third save
// have landed at name meanwhile, that newest file is put back instead.
func (d *Dir) swapBack(tmp, name string, mine []byte) {
	f, err := d.root.Open(".")
	if err != nil {
		return
	}
	defer f.Close()
	if exchange(f, tmp, name) == nil {
		if b, err := d.readTemp(tmp); err == nil && !bytes.Equal(b, mine) {
			exchange(f, tmp, name) // the newest save goes back in place
		}
	}
	d.root.Remove(tmp)
}

// readTemp reads one of snag's temp files, whatever its size.
func (d *Dir) readTemp(name string) ([]byte, error) {
	f, err := d.root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileSize+1))
}

// Write replaces a generated file (plan.json) atomically. It is not for task
// files, which go through [Dir.Create] and [Dir.Update].
func (d *Dir) Write(name string, data []byte) error {
	tmp, err := d.writeTemp(name, data, 0o644)
	if err != nil {
		return err
	}
	if err := d.root.Rename(tmp, name); err != nil {
		d.root.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := d.at(StepRenamed); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return d.syncDir()
}

// Remove deletes a file; it is for generated files and tests, never for
// task files.
func (d *Dir) Remove(name string) error { return d.root.Remove(name) }

// SweepTemps removes snag's temp files older than age, left behind by a
// crash, and reports how many it removed.
func (d *Dir) SweepTemps(age time.Duration) (int, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), TempSuffix) || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err != nil || time.Since(fi.ModTime()) < age {
			continue
		}
		if d.root.Remove(de.Name()) == nil {
			n++
		}
	}
	return n, nil
}

func (d *Dir) writeTemp(name string, data []byte, perm fs.FileMode) (string, error) {
	if err := checkFlat(name); err != nil {
		return "", err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	base := name
	if len(base) > 100 {
		base = base[:100]
	}
	tmp := "." + base + "." + hex.EncodeToString(rnd[:]) + TempSuffix
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	werr := d.at(StepTempCreated)
	if werr == nil {
		if _, werr = f.Write(data); werr == nil {
			werr = d.at(StepTempWritten)
		}
	}
	var serr error
	if werr == nil {
		if serr = f.Sync(); serr == nil {
			serr = d.at(StepTempSynced)
		}
	}
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		d.root.Remove(tmp)
		return "", fmt.Errorf("write %s: %w%s", name, err, fixFor(err))
	}
	return tmp, nil
}

// fixFor names the fix for a write that failed for want of room.
func fixFor(err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return " (free some space on that disk and try again; the file was not changed)"
	}
	return ""
}

func (d *Dir) syncDir() error {
	f, err := d.root.Open(".")
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
		return fmt.Errorf("%q is not a file name in this folder", truncate(name, 80))
	}
	return nil
}

// Temps lists snag's temp files older than age, without removing them.
func (d *Dir) Temps(age time.Duration) ([]string, error) {
	f, err := d.root.Open(".")
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
