// Command taskgen writes generated task files, for benchmarks and for
// trying snag on a queue of any size: taskgen -n 1000 DIR writes SNAG-1 to
// SNAG-1000 into DIR (a project's .snag/tasks). It never overwrites a file.
// With -format backlog it writes the same tasks as Backlog.md's files
// (DIR is then a backlog/tasks folder), for make bench-peer.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/snagdev/snag/internal/taskgen"
)

func main() {
	n := flag.Int("n", 1000, "how many tasks")
	seed := flag.Int64("seed", 1, "the same seed writes the same tasks")
	format := flag.String("format", "snag", "snag, or backlog for Backlog.md's task files")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: taskgen [-n N] [-seed S] [-format snag|backlog] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	write := taskgen.Write
	switch *format {
	case "snag":
	case "backlog":
		write = writeBacklog
	default:
		fmt.Fprintf(os.Stderr, "taskgen: -format %q: want snag or backlog\n", *format)
		os.Exit(2)
	}
	if err := write(flag.Arg(0), *n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
