// Package proc reads what Linux's /proc says of a process: when it
// started, and which boot this is, so that a process seen once can be told
// apart from another that took its pid later. Where there is no /proc
// (another system), nothing is known and nothing is judged.
//
// It is a leaf: it imports nothing of snag's.
package proc

import (
	"os"
	"strconv"
	"strings"
)

// Start reads the start time of process pid (clock ticks since boot) from
// /proc, or 0 where there is none: no such process, or no /proc.
func Start(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0
	}
	n, _ := strconv.ParseInt(fields[19], 10, 64) // field 22 overall
	return n
}

// BootID is the machine's boot id, different at every boot, or "" where
// there is none.
func BootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// Alive reports whether the process seen as pid, started at start (Start)
// during boot (BootID), is still running: the same pid with the same start
// time, on this boot. A process of another boot, or one seen with no pid or
// no boot id (of another host, say), is never judged: it counts as alive.
func Alive(pid int, start int64, boot string) bool {
	if pid <= 0 || boot == "" || boot != BootID() {
		return true
	}
	now := Start(pid)
	return now != 0 && now == start
}
