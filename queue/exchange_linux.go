//go:build linux

package queue

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
