//go:build !linux

package queue

import "os"

// exchange is not available here: Update falls back to a rename.
func exchange(dir *os.File, a, b string) error { return errNoExchange }
