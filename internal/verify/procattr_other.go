//go:build !linux

package verify

import "syscall"

// procAttr puts a command in its own process group, so a timeout kills
// all of it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
