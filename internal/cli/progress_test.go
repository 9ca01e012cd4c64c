package cli

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: what is written to tty is read from
// master.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set: the terminal's progress must be checked, and there are no pseudo-terminals: %v", err)
		}
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestSayingOnATerminalOnly: a long wait says what it waits for on a
// terminal, then that it waits still, and says nothing when piped. The
// test ticks the wait's timer itself.
func TestSayingOnATerminalOnly(t *testing.T) {
	ticks := make(chan time.Time)
	asked := make(chan struct{}, 16)
	timer := progressTimer
	progressTimer = func(time.Duration) <-chan time.Time { asked <- struct{}{}; return ticks }
	t.Cleanup(func() { progressTimer = timer })

	master, tty := openPTY(t)
	c := &call{Env: Env{Stderr: tty}}
	stop := c.saying("waiting for snagd to rebuild the index")
	var got strings.Builder
	buf := make([]byte, 4096)
	master.SetReadDeadline(time.Now().Add(20 * time.Second))
	read := func(want string) {
		t.Helper()
		for !strings.Contains(got.String(), want) {
			n, err := master.Read(buf)
			if err != nil {
				t.Fatalf("read the terminal: %v; it showed %q, want %q", err, got.String(), want)
			}
			got.Write(buf[:n])
		}
	}
	ticks <- time.Now() // the first wait is over
	read("snag: waiting for snagd to rebuild the index…")
	ticks <- time.Now() // and the next
	read("snag: still waiting for snagd to rebuild the index: ")
	stop()

	// Piped, nothing is timed: a wait that were would have asked for its
	// timer before stop returned.
	for len(asked) > 0 {
		<-asked
	}
	var piped bytes.Buffer
	c = &call{Env: Env{Stderr: &piped}}
	c.saying("waiting for snagd to rebuild the index")()
	if len(asked) > 0 || piped.Len() > 0 {
		t.Errorf("piped, the wait timed itself (%d) or said %q; want nothing", len(asked), piped.String())
	}
}
