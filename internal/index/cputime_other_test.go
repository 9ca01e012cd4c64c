//go:build !unix

package index_test

import "time"

// cpuTime is unknown here: the benchmarks then report 0 CPU time.
func cpuTime() time.Duration { return 0 }
