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
// terminal, then that it waits still, and says nothing when piped.
func TestSayingOnATerminalOnly(t *testing.T) {
	after, every := progressAfter, progressEvery
	progressAfter, progressEvery = 50*time.Millisecond, 50*time.Millisecond
	t.Cleanup(func() { progressAfter, progressEvery = after, every })

	master, tty := openPTY(t)
	c := &call{Env: Env{Stderr: tty}}
	stop := c.saying("waiting for snagd to rebuild the index")
	var got strings.Builder
	buf := make([]byte, 4096)
	master.SetReadDeadline(time.Now().Add(20 * time.Second))
	for !strings.Contains(got.String(), "still waiting for snagd to rebuild the index: ") {
		n, err := master.Read(buf)
		if err != nil {
			t.Fatalf("read the terminal: %v; it showed %q", err, got.String())
		}
		got.Write(buf[:n])
	}
	stop()
	if !strings.HasPrefix(got.String(), "snag: waiting for snagd to rebuild the index…") {
		t.Errorf("the terminal showed %q; want it to say first what the wait is for", got.String())
	}

	var piped bytes.Buffer
	c = &call{Env: Env{Stderr: &piped}}
	stop = c.saying("waiting for snagd to rebuild the index")
	time.Sleep(200 * time.Millisecond) // four times the wait before a terminal is told
	stop()
	if piped.Len() > 0 {
		t.Errorf("piped, the wait said %q; want nothing", piped.String())
	}
}
