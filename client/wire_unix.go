//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package client

import (
	"errors"
	"syscall"
)

// open reports whether an idle connection is still open and has nothing
// to read: a peek at its socket, which does not block (Go's sockets are
// non-blocking). snagd's close of an idle connection shows as the end of
// its stream; any byte there is one no request asked for.
func open(c *wireConn) bool {
	if c.br.Buffered() > 0 {
		return false
	}
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errors.Is(err, syscall.EAGAIN) // no error: a byte, or the end
		return true                            // never wait for the socket to be readable
	})
	return err == nil && alive
}
