package mcp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkR1_Worktrees is R1 as a figure: N worktrees of one repository
// (14 and 30) with no snagd running, and in each a snag list and a snag mcp
// agent's claim-next released from one start line, with snag built without
// the race detector. It reports the time until every worktree's list has
// answered (served_s: the slowest), the snagd processes serving the
// repository once they settle (daemons), tasks granted twice (double_grants),
// and the resident memory of the repository's daemons with every worktree
// served (daemon_MB, the sum of VmRSS).
func BenchmarkR1_Worktrees(b *testing.B) {
	for _, n := range []int{14, 30} {
		b.Run(fmt.Sprintf("worktrees=%d", n), func(b *testing.B) {
			r := newRepo(b, n)
			r.bin = benchSnag(b)
			var served, mb []float64
			var daemons, doubles int
			for range b.N {
				r.stopDaemons(b)
				s, d, dbl, m := r.orchestratedStart(b)
				served, mb = append(served, s), append(mb, m)
				daemons, doubles = max(daemons, d), doubles+dbl
			}
			b.ReportMetric(median(served), "served_s")
			b.ReportMetric(float64(daemons), "daemons")
			b.ReportMetric(float64(doubles), "double_grants")
			b.ReportMetric(median(mb), "daemon_MB")
		})
	}
}

// orchestratedStart runs one start line in every worktree of r: a snag
// list and a bridge's claim-next each. It returns the seconds until the
// slowest list answered, how many snagd serve the repository then, how
// many tasks were granted twice, and the daemons' resident memory in MB.
func (r *repo) orchestratedStart(b *testing.B) (served float64, daemons, doubles int, mb float64) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	granted := map[string]bool{}
	var sessions []*sdk.ClientSession
	for _, tree := range r.trees {
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			if _, err := r.snag(tree, "list"); err != nil {
				b.Error(err)
			}
			mu.Lock()
			slowest = max(slowest, time.Since(t0))
			mu.Unlock()
		}()
		go func() {
			defer wg.Done()
			<-start
			cs, _ := r.bridge(b, tree)
			if cs == nil {
				return
			}
			sc, err := claimNext(cs)
			mu.Lock()
			defer mu.Unlock()
			sessions = append(sessions, cs)
			if err != nil {
				b.Errorf("snag_claim in %s: %v", tree, err)
				return
			}
			if sc.Task != nil {
				if granted[sc.Task.ID] {
					doubles++
				}
				granted[sc.Task.ID] = true
			}
		}()
	}
	close(start)
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for len(r.daemons()) > 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	pids := r.daemons()
	for _, pid := range pids {
		mb += rssMB(pid)
	}
	for _, cs := range sessions {
		cs.Close()
	}
	return slowest.Seconds(), len(pids), doubles, mb
}

// rssMB is a process's resident memory in MB (VmRSS), or 0.
func rssMB(pid int) float64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
