package mcp

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/taskgen"
)

// pageBackend is a live backend that answers every list with one page,
// read once from files: what the bridge does with a page, without snagd.
type pageBackend struct {
	*Files
	page Page
}

func (b *pageBackend) Source() string                                 { return "daemon" }
func (b *pageBackend) List(context.Context, ListQuery) (Page, error)  { return b.page, nil }
func (b *pageBackend) SetClient(string, string)                       {}
func (b *pageBackend) Start(context.Context) error                    { return nil }
func (b *pageBackend) Holds(string) bool                              { return false }
func (b *pageBackend) Close() error                                   { return nil }
func (b *pageBackend) Watch(ctx context.Context, on func(key string)) { <-ctx.Done() }

// BenchmarkStdioList measures the bridge's own work for snag_list (a page
// of 20 generated tasks, limit 20) over stdio, in process: the line read,
// the SDK's dispatch, the tool's text and structured output, the answer
// written. The backend hands back a page kept in memory. An iteration is
// a round of 300 calls; it reports the median over the rounds of the
// process's CPU time per call (the driver's share included) and the bytes
// allocated per call.
func BenchmarkStdioList(b *testing.B) {
	root := b.TempDir()
	if err := taskgen.Write(filepath.Join(root, ".snag", "tasks"), 200, 1); err != nil {
		b.Fatal(err)
	}
	files := &Files{Root: root}
	page, err := files.List(context.Background(), ListQuery{Limit: 20})
	if err != nil || len(page.Rows) != 20 {
		b.Fatalf("list the generated tasks: %d rows, %v", len(page.Rows), err)
	}
	call := stdioCaller(b, &pageBackend{Files: files, page: page})
	const perRound = 300
	var cpu, alloc []float64
	for b.Loop() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		a0, c0 := ms.TotalAlloc, cpuTime()
		for range perRound {
			call()
		}
		c1 := cpuTime()
		runtime.ReadMemStats(&ms)
		cpu = append(cpu, float64(c1-c0)/float64(time.Microsecond)/perRound)
		alloc = append(alloc, float64(ms.TotalAlloc-a0)/perRound)
	}
	b.ReportMetric(median(cpu), "cpu-us/call")
	b.ReportMetric(median(alloc), "B/call")
}

// median is the median of xs.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stdioCaller starts a bridge over pipes on backend, initializes it, and
// returns a function that makes one snag_list call and reads its answer.
// The bridge ends with the benchmark.
func stdioCaller(b *testing.B, backend *pageBackend) func() {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Root: backend.Root, Daemon: backend, In: inR, Out: outW})
		outW.Close()
	}()
	b.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	answers := bufio.NewReaderSize(outR, 256<<10)
	send := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			b.Fatal(err)
		}
	}
	answer := func() []byte {
		line, err := answers.ReadSlice('\n')
		if err != nil {
			b.Fatalf("read an answer: %v", err)
		}
		return line
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	answer()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	id := 1
	call := func() {
		id++
		send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"snag_list","arguments":{}}}`)
		if a := answer(); len(a) < 1000 || bytes.Contains(a, []byte(`"isError":true`)) {
			b.Fatalf("snag_list answered %s", a)
		}
	}
	call()
	return call
}
