// Command snagd is snag's per-worktree daemon: it watches the task files,
// keeps the index live, owns every write and holds agents' leases.
//
// This version does not run the daemon yet: the snag command line works on
// the files and the index directly. snagd says so and exits.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "snagd: the daemon is not part of this version yet; the snag command line works without it (snag help)")
	os.Exit(2)
}
