//go:build !linux

package taskfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/snagdev/snag/internal/queue"
)

func (d *Dir) readOnce(root *os.Root, name string) ([]byte, fs.FileInfo, error) {
	lfi, err := root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if lfi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, fmt.Errorf("read %s: %w", name, ErrSymlink)
	}
	if !lfi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("read %s: not a regular file", name)
	}
	f, err := root.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, errReplaced // removed meanwhile: look again
		}
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !os.SameFile(lfi, fi) {
		return nil, nil, errReplaced
	}
	data, err := io.ReadAll(io.LimitReader(f, queue.MaxFileSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, fi, nil
}

func sameFile(a, b fs.FileInfo) bool { return os.SameFile(a, b) }
