package proc

import (
	"os"
	"testing"
)

func TestAlive(t *testing.T) {
	pid, boot := os.Getpid(), BootID()
	start := Start(pid)
	if start == 0 || boot == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no /proc here: CI runs on Linux, where snag reads a process's start and boot from /proc")
		}
		t.Skip("no /proc here: nothing is judged")
	}
	for _, c := range []struct {
		what  string
		pid   int
		start int64
		boot  string
		want  bool
	}{
		{"this process, as it started", pid, start, boot, true},
		{"a reused pid (another start time)", pid, start + 1, boot, false},
		{"another boot", pid, start + 1, "00000000-0000-4000-8000-000000000000", true},
		{"no boot id (another host)", pid, start + 1, "", true},
		{"no pid", 0, start, boot, true},
	} {
		if got := Alive(c.pid, c.start, c.boot); got != c.want {
			t.Errorf("%s: Alive = %v, want %v", c.what, got, c.want)
		}
	}
}
