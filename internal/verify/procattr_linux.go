package verify

import "syscall"

// procAttr puts a command in its own process group, so a timeout kills
// all of it, and has the kernel kill it when snagd dies: a verify command
// never outlives the daemon that started it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
