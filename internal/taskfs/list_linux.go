package taskfs

import (
	"errors"
	"os"
	"time"

	"github.com/snagdev/snag/internal/queue"
	"golang.org/x/sys/unix"
)

// listStat lists the task files of the open folder f by their names alone
// and one fstatat each, relative to the folder, without following links:
// the same entries os.File.ReadDir and Info give, without the file info
// each of those allocates (a start on 100,000 files lists them all).
func listStat(f *os.File) ([]Entry, error) {
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	out := make([]Entry, 0, len(names))
	var st unix.Stat_t
	for _, name := range names {
		if !queue.IsTaskFileName(name) {
			continue
		}
		e := Entry{Name: name}
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		for errors.Is(err, unix.EINTR) {
			err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		switch {
		case errors.Is(err, unix.ENOENT):
			continue // removed while we listed
		case err != nil:
			e.Problem = &os.PathError{Op: "lstat", Path: name, Err: err}
		default:
			e.Problem = typeProblem(st.Mode & unix.S_IFMT)
			if e.Problem == nil {
				e.Size = st.Size
				e.ModTime = time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
				e.Stamp = Stamp{Size: st.Size, ModTime: st.Mtim.Nano(), Inode: st.Ino, Change: st.Ctim.Nano()}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// typeProblem is the problem of an entry of the file type ifmt (the
// S_IFMT bits of its mode), nil for a regular file.
func typeProblem(ifmt uint32) error {
	switch ifmt {
	case unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
		return ErrSymlink
	case unix.S_IFDIR:
		return errFolder
	}
	return errNotRegular
}
