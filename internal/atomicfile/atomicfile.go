// Package atomicfile replaces files whole: a reader, and the disk after a
// crash, sees either the file that was there or the new bytes, never part of
// them. It writes a temp file in the same folder, syncs it, renames it over
// the target and syncs the folder.
//
// It is for snag's small files outside tasks/ (approvals, the token, agent
// configs, screenshots, plans and notes). The task files have their own writer in queue,
// which also re-checks the file it replaces. atomicfile imports nothing of
// snag's.
package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// TempSuffix ends the name of the temp file WriteFile writes beside the
// target, as in ".config.toml.123456.snag-tmp". It is the suffix queue's
// task writer uses, so one .gitignore line and the watcher's filter cover
// both.
const TempSuffix = ".snag-tmp"

// WriteFile writes data to path with the permission bits perm, replacing
// any file there in one rename. The folder must exist. On a failure before
// the rename the file at path is as it was and no temp file is left behind;
// a failure to sync the folder after it is reported, with the new file in
// place.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	// The rename is done: from here the new file is in place, and only its
	// durability is in question.
	return SyncDir(filepath.Dir(path))
}

// Create writes a new file at path, whole or not at all: a synced temp
// file beside it, linked into place, so a reader never sees part of it and
// a file already at path is never replaced (an error wrapping
// fs.ErrExist). The folder is synced once the file is in place.
func Create(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	return SyncDir(dir)
}

// ErrChanged is wrapped by the error of [ReplaceIf] when the file no
// longer holds what the change was made from.
var ErrChanged = errors.New("the file changed meanwhile")

// ReplaceIf puts data in place of the file at path when the file still
// holds old, as WriteFile does: a person's save since old was read is
// kept, and the write refused with ErrChanged. The new bytes are written
// and synced first, so the look at the file is the last thing before the
// rename.
func ReplaceIf(path string, old, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, old) {
		return fmt.Errorf("write %s: %w", path, ErrChanged)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// writeTemp writes data to a new synced temp file beside path and
// returns its name; on a failure none is left.
func writeTemp(path string, data []byte, perm fs.FileMode) (name string, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if len(base) > 100 {
		base = base[:100]
	}
	f, err := os.CreateTemp(dir, "."+base+".*"+TempSuffix)
	if err != nil {
		return "", fmt.Errorf("write %s: %w%s", path, err, fixFor(err))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("write %s: %w%s", path, err, fixFor(err))
	}
	if err := f.Chmod(perm); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("write %s: %w%s", path, err, fixFor(err))
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w%s", path, err, fixFor(err))
	}
	return f.Name(), nil
}

// SyncDir makes the renames and removals already done in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// fixFor names the fix for a write that failed for want of room.
func fixFor(err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return " (free some space on that disk and try again; the file was not changed)"
	}
	return ""
}
