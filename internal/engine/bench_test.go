package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/taskgen"
)

// BenchmarkClaim measures one claim-next in process, with no HTTP: the
// engine on 10,000 generated tasks (1,000 with -short) grants the lease,
// swaps the file, indexes the bytes it wrote and audits it, in one
// transaction with an fsync. One agent claims again and again (the
// project lets a session hold any number). It reports the wall time and
// the process's CPU time per claim.
func BenchmarkClaim(b *testing.B) {
	e, ctx := benchEngine(b)
	s, err := e.Register(ctx, index.Session{Name: "BENCH", Client: "bench", PID: os.Getpid()})
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	start := time.Now()
	claims := 0
	for b.Loop() {
		got, err := e.Claim(ctx, s, nil, false)
		if err != nil {
			b.Fatal(err)
		}
		if got.Task == nil {
			b.Fatalf("nothing ready after %d claims: %s", claims, got.Reason)
		}
		claims++
	}
	took, cpu := time.Since(start), cpuTime()-cpu0
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(claims), "cpu-ms/claim")
	b.ReportMetric(float64(claims)/took.Seconds(), "claims/s")
}

// BenchmarkClaimParallel is BenchmarkClaim with 16 agents claiming at
// once, each with its own session, as snagd's clients do: the claims'
// temp files are written side by side and their swaps and rows committed
// in batches (commit.go). It reports the claims per second, the CPU time
// per claim and the claims per batch's commit.
func BenchmarkClaimParallel(b *testing.B) {
	e, ctx := benchEngine(b)
	const agents = 16
	var ss []index.Session
	for i := range agents {
		s, err := e.Register(ctx, index.Session{Name: fmt.Sprintf("BENCH-%d", i), Client: "bench", PID: os.Getpid()})
		if err != nil {
			b.Fatal(err)
		}
		ss = append(ss, s)
	}
	cpu0 := cpuTime()
	start := time.Now()
	claims := 0
	for b.Loop() {
		var wg sync.WaitGroup
		for _, s := range ss {
			wg.Go(func() {
				got, err := e.Claim(ctx, s, nil, false)
				if err != nil {
					b.Error(err)
				} else if got.Task == nil {
					b.Errorf("nothing ready: %s", got.Reason)
				}
			})
		}
		wg.Wait()
		claims += agents
	}
	took, cpu := time.Since(start), cpuTime()-cpu0
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(claims), "cpu-ms/claim")
	b.ReportMetric(float64(claims)/took.Seconds(), "claims/s")
}

// benchEngine opens an engine on 10,000 generated tasks (1,000 with
// -short) whose project lets a session hold any number of them.
func benchEngine(b *testing.B) (*Engine, context.Context) {
	n := 10_000
	if testing.Short() {
		n = 1000
	}
	root := b.TempDir()
	if _, err := project.Init(root); err != nil {
		b.Fatal(err)
	}
	tasks := filepath.Join(root, project.Folder, "tasks")
	if err := taskgen.Write(tasks, n, 1); err != nil {
		b.Fatal(err)
	}
	cfg := filepath.Join(root, project.Folder, project.ConfigFile)
	if err := os.WriteFile(cfg, []byte(`{"version": 1, "claim": {"max_per_session": 0}}`+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	e, err := Open(ctx, Options{Root: root, Home: b.TempDir(), Coord: joinLive(b, root)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	e.Rescan(ctx)
	e.TeamReconciled() // a new live state has nothing to reconcile: as the team service's first reconcile finds
	return e, ctx
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
