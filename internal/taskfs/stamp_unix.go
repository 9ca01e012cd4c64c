//go:build linux || darwin || freebsd || netbsd

package taskfs

import (
	"io/fs"
	"syscall"
)

func inodeAndChange(fi fs.FileInfo) (uint64, int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return uint64(st.Ino), changeTime(st)
}
