package mcp_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/taskgen"
)

// BenchmarkBridgeCPU measures the CPU time snag mcp spends on a snag_list
// (limit 20) served by snagd, on 2,000 generated tasks: one bridge, and
// in each round (an iteration) 500 calls through it. It reports the median
// over the rounds of the bridge's CPU per call (user and system, from
// /proc, in clock ticks of 10 ms) and of the calls' wall p50. It is the
// figure docs/decisions.md weighs a change of the bridge's transport or
// tool registration by.
func BenchmarkBridgeCPU(b *testing.B) {
	const n, perRound = 2000, 500
	bin := benchSnag(b)
	root := generated(b, fmt.Sprintf("list-%d", n), func(tasks string) error { return taskgen.Write(tasks, n, 1) })
	d := startSnagd(b, bin, root, n)
	d.settle()
	cmd := exec.Command(bin, "mcp")
	cmd.Dir, cmd.Env = d.root, d.environ()
	br := &bridge{log: &snagdtest.Buffer{}}
	cmd.Stderr = br.log
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "go-bench", Version: "1.0"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	cancel()
	if err != nil {
		b.Fatalf("connect snag mcp: %v\n%s", err, br.log.String())
	}
	br.cs = cs
	b.Cleanup(func() { cs.Close() })
	br.mustTool(b, "snag_list", nil) // registers the session
	pid := cmd.Process.Pid
	var cpu, p50 []float64
	for b.Loop() {
		t0 := procTicks(pid)
		var lat []time.Duration
		for range perRound {
			lat = append(lat, br.mustTool(b, "snag_list", nil).took)
		}
		cpu = append(cpu, float64(procTicks(pid)-t0)*10_000/perRound) // 100 ticks a second, in µs
		p50 = append(p50, quantile(lat, 0.5))
	}
	logLoad(b)
	b.ReportMetric(medianOf(cpu), "bridge-cpu-us/call")
	b.ReportMetric(medianOf(p50), "p50-ms")
}

// procTicks is a process's CPU time so far (user and system), in clock
// ticks, or 0 where /proc is missing.
func procTicks(pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // the name may hold spaces
	if len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return user + sys
}

// medianOf is the median of xs.
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
