//go:build linux

package taskfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// exchange swaps the files a and b of the folder dir in one atomic step
// (renameat2 with RENAME_EXCHANGE). It fails with errNoExchange where the
// filesystem cannot swap.
func exchange(dir *os.File, a, b string) error {
	rc, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		opErr = unix.Renameat2(int(fd), a, int(fd), b, unix.RENAME_EXCHANGE)
	}); err != nil {
		return err
	}
	if opErr == unix.EINVAL || opErr == unix.ENOSYS || opErr == unix.EOPNOTSUPP {
		return errNoExchange
	}
	return opErr
}

// openForWriting reports whether another open file description has f's
// file open for writing: the kernel refuses a read lease (F_SETLEASE,
// F_RDLCK) on such a file with EAGAIN. f must be open read-only. known is
// false when the lease is refused for another reason (a file of another
// user, a filesystem without leases).
func openForWriting(f *os.File) (writing, known bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, false
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		_, opErr = unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_RDLCK)
		if opErr == nil {
			unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_UNLCK)
		}
	}); err != nil {
		return false, false
	}
	switch opErr {
	case nil:
		return false, true
	case unix.EAGAIN, unix.EBUSY:
		return true, true
	}
	return false, false
}
