//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package client

// open reports whether an idle connection may serve another request:
// without a way to peek at its socket here, none is reused.
func open(*wireConn) bool { return false }
