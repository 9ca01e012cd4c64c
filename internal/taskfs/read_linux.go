package taskfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/snagdev/snag/internal/queue"
	"golang.org/x/sys/unix"
)

// readOnce reads one file of the folder root, on Linux with plain system
// calls on the folder's descriptor: the look at the name (no link is
// followed, no FIFO waited on), the open, one fstat and reads into a
// buffer of the file's size. An os.File costs four fcntl calls and a
// refused epoll registration more, and io.ReadAll a read for every 512
// bytes it grows by; a cold reindex reads every file.
func (d *Dir) readOnce(root *os.Root, name string) ([]byte, fs.FileInfo, error) {
	folder, err := d.folderConn(root)
	if err != nil {
		return nil, nil, err
	}
	// The look and the open are made on the folder's descriptor while it
	// is held open (Control): a reopen may close the folder meanwhile.
	var lst unix.Stat_t
	fd, err := -1, error(nil)
	cerr := folder.Control(func(dirfd uintptr) {
		err = retryEINTR(func() error { return unix.Fstatat(int(dirfd), name, &lst, unix.AT_SYMLINK_NOFOLLOW) })
		if err != nil {
			err = &fs.PathError{Op: "lstat", Path: name, Err: err}
			return
		}
		switch lst.Mode & unix.S_IFMT {
		case unix.S_IFREG:
		case unix.S_IFLNK:
			err = fmt.Errorf("read %s: %w", name, ErrSymlink)
			return
		default:
			err = fmt.Errorf("read %s: not a regular file", name)
			return
		}
		err = retryEINTR(func() (err error) {
			fd, err = unix.Openat(int(dirfd), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
			return err
		})
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP):
			err = errReplaced // removed or replaced meanwhile: look again
		case err != nil:
			err = &fs.PathError{Op: "open", Path: name, Err: err}
		}
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, nil, err
	}
	defer unix.Close(fd)
	st := new(syscall.Stat_t)
	if err := retryEINTR(func() error { return syscall.Fstat(fd, st) }); err != nil {
		return nil, nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Dev != lst.Dev || st.Ino != lst.Ino || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, nil, errReplaced
	}
	// Read to the end, at most queue.MaxFileSize+1 bytes: a file that grew since
	// the fstat is read whole all the same.
	data := make([]byte, 0, min(st.Size, queue.MaxFileSize)+1)
	for len(data) <= queue.MaxFileSize {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		var n int
		err := retryEINTR(func() (err error) {
			n, err = unix.Read(fd, data[len(data):min(cap(data), queue.MaxFileSize+1)])
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", name, &fs.PathError{Op: "read", Path: name, Err: err})
		}
		if n == 0 {
			break
		}
		data = data[:len(data)+n]
	}
	return data, &statInfo{name: name, st: st}, nil
}

// folderConn returns the folder root as a file opened for its descriptor,
// opened once per root and closed with it.
func (d *Dir) folderConn(root *os.Root) (syscall.RawConn, error) {
	if f, ok := d.folders.Load(root); ok {
		return f.(*os.File).SyscallConn()
	}
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	if prev, loaded := d.folders.LoadOrStore(root, f); loaded {
		f.Close()
		f = prev.(*os.File)
	} else if _, err := root.Stat("."); err != nil {
		// closeRoot ran meanwhile: it would not close this file.
		d.folders.Delete(root)
		f.Close()
		return nil, err
	}
	return f.SyscallConn()
}

func retryEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// sameFile reports whether two infos are of one file; either may be a
// statInfo.
func sameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// statInfo is the fs.FileInfo of a regular file read by readOnce.
type statInfo struct {
	name string
	st   *syscall.Stat_t
}

func (fi *statInfo) Name() string       { return fi.name }
func (fi *statInfo) Size() int64        { return fi.st.Size }
func (fi *statInfo) Mode() fs.FileMode  { return fs.FileMode(fi.st.Mode & 0o777) }
func (fi *statInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *statInfo) IsDir() bool        { return false }
func (fi *statInfo) Sys() any           { return fi.st }
