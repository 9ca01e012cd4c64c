// Command taskgen writes generated task files, for benchmarks and for
// trying snag on a queue of any size: taskgen -n 1000 DIR writes SNAG-1 to
// SNAG-1000 into DIR (a project's .snag/tasks). It never overwrites a file.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/snagdev/snag/taskgen"
)

func main() {
	n := flag.Int("n", 1000, "how many tasks")
	seed := flag.Int64("seed", 1, "the same seed writes the same tasks")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: taskgen [-n N] [-seed S] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := taskgen.Write(flag.Arg(0), *n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
