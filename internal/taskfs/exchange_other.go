//go:build !linux

package taskfs

import "os"

// exchange is not available here: Update falls back to a rename.
func exchange(dir *os.File, a, b string) error { return errNoExchange }

// openForWriting cannot tell here.
func openForWriting(f *os.File) (writing, known bool) { return false, false }
