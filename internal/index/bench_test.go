package index_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/taskgen"
)

// Benchmarks measure; they never assert a duration. The targets on a
// 2-core machine are: a cold reindex of 10,000 tasks under 1 s and of
// 100,000 under 10 s, a list of 20 from 100,000 under 2 ms, a search
// under 10 ms. Run them with
//
//	go test -run '^$' -bench . -benchtime 3x ./index/
//
// (and more iterations for the fast ones). -short skips the 100k ones.

var (
	benchMu     sync.Mutex
	benchDir    string // holds the generated folders and databases; TestMain removes it
	benchFolder = map[int]string{}
	benchDBs    = map[int]*index.DB{}
)

// benchRoot returns the folder shared by every benchmark of the process.
// The caller holds benchMu.
func benchRoot() string {
	if benchDir == "" {
		dir, err := os.MkdirTemp("", "snag-index-bench-")
		if err != nil {
			panic(err)
		}
		benchDir = dir
	}
	return benchDir
}

// cleanupBench closes the shared databases and removes the shared folder.
func cleanupBench() {
	benchMu.Lock()
	defer benchMu.Unlock()
	for _, db := range benchDBs {
		db.Close()
	}
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
}

// generated returns a folder of n generated task files, written once per
// process.
func generated(b *testing.B, n int) string {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if p, ok := benchFolder[n]; ok {
		return p
	}
	p := filepath.Join(benchRoot(), fmt.Sprintf("tasks-%d", n))
	start := time.Now()
	if err := taskgen.Write(p, n, 1); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d task files in %v", n, time.Since(start).Round(time.Millisecond))
	benchFolder[n] = p
	return p
}

// indexed returns a database holding n generated tasks, built once per
// process.
func indexed(b *testing.B, n int) *index.DB {
	b.Helper()
	folder := generated(b, n)
	benchMu.Lock()
	defer benchMu.Unlock()
	if db, ok := benchDBs[n]; ok {
		return db
	}
	ctx := context.Background()
	path := filepath.Join(benchRoot(), fmt.Sprintf("snag-%d.db", n))
	dir := openDir(b, folder)
	start := time.Now()
	if _, err := index.Build(ctx, path, dir, index.BuildOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Logf("indexed %d tasks in %v", n, time.Since(start).Round(time.Millisecond))
	db, err := index.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	benchDBs[n] = db
	return db
}

func openDir(tb testing.TB, path string) *taskfs.Dir {
	tb.Helper()
	dir, err := taskfs.OpenDir(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dir.Close() })
	return dir
}

func skipLong(b *testing.B) {
	if testing.Short() {
		b.Skip("100k benchmarks are skipped with -short")
	}
}

// benchReindex makes the index of n generated task files where there is
// none, b.N times: by a cold Build, or, with inPlace, by a Rebuild into an
// empty database opened first (outside the timing), as every cold start
// did before Build.
func benchReindex(b *testing.B, n int, inPlace bool) {
	ctx := context.Background()
	dir := openDir(b, generated(b, n))
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "snag.db")
		var db *index.DB
		var err error
		if inPlace {
			if db, err = index.Open(ctx, path); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		c := cpuTime()
		var st index.ScanStats
		if inPlace {
			st, err = db.Rebuild(ctx, dir)
		} else {
			st, err = index.Build(ctx, path, dir, index.BuildOptions{Fence: 1})
		}
		cpu += cpuTime() - c
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if st.Files != n || st.Parsed != n {
			b.Fatalf("rebuild saw %d files and parsed %d, want %d", st.Files, st.Parsed, n)
		}
		if db != nil {
			db.Close()
		}
		os.RemoveAll(filepath.Dir(path))
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "files/s")
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/rebuild")
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/rebuild")
}

// BenchmarkReindex10k is a cold reindex of 10,000 task files: a Build
// where there is no database, as snagd's start makes one.
func BenchmarkReindex10k(b *testing.B) { benchReindex(b, 10_000, false) }

// BenchmarkReindex100k is a cold reindex of 100,000 task files.
func BenchmarkReindex100k(b *testing.B) {
	skipLong(b)
	benchReindex(b, 100_000, false)
}

// BenchmarkRebuildInPlace10k rebuilds the index of 10,000 task files into
// an empty database that is open (DB.Rebuild, in one WAL transaction): a
// start's cold reindex before Build, and what snag reindex does.
func BenchmarkRebuildInPlace10k(b *testing.B) { benchReindex(b, 10_000, true) }

// BenchmarkRebuildInPlace100k is BenchmarkRebuildInPlace10k with 100,000
// task files.
func BenchmarkRebuildInPlace100k(b *testing.B) {
	skipLong(b)
	benchReindex(b, 100_000, true)
}

// reportMS reports the wall time of an operation in milliseconds, and the
// CPU time the process spent on it (which a busy machine inflates less).
func reportMS(b *testing.B, cpuStart time.Duration) {
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/op")
	b.ReportMetric((cpuTime()-cpuStart).Seconds()*1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkList20Of100k lists one page of 20 from 100,000 tasks: the first
// page of the default list, the first page of open tasks, and a second page
// through a cursor.
func BenchmarkList20Of100k(b *testing.B) {
	skipLong(b)
	db := indexed(b, 100_000)
	ctx := context.Background()
	first, err := db.List(ctx, index.Filter{Limit: 20})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		f    index.Filter
	}{
		{"default", index.Filter{Limit: 20}},
		{"status=open", index.Filter{Limit: 20, Statuses: []queue.Status{queue.StatusOpen}}},
		{"status=open,claimed", index.Filter{Limit: 20, Statuses: []queue.Status{queue.StatusOpen, queue.StatusClaimed}}},
		{"wave=3", index.Filter{Limit: 20, Wave: 3}},
		{"all", index.Filter{Limit: 20, All: true}},
		{"page2", index.Filter{Limit: 20, Cursor: first.Next}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				p, err := db.List(ctx, bc.f)
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Rows) != 20 {
					b.Fatalf("%d rows, want 20", len(p.Rows))
				}
			}
			reportMS(b, cpu)
		})
	}
}

// BenchmarkList1000 lists all of 1,000 tasks in one page, as snag list
// --all does on a queue of that size: mostly the scan of each row.
func BenchmarkList1000(b *testing.B) {
	db := indexed(b, 1000)
	ctx := context.Background()
	cpu := cpuTime()
	for b.Loop() {
		p, err := db.List(ctx, index.Filter{Limit: 1000, All: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Rows) != 1000 {
			b.Fatalf("%d rows, want 1000", len(p.Rows))
		}
	}
	reportMS(b, cpu)
}

// BenchmarkSearch100k searches 100,000 tasks for a word in every one, a
// word in a few percent, a word in a handful, two words, the start of a
// word (chec: checkbox and checkout), and three words found together in a
// few hundred tasks, which are ranked. It reports how many tasks match:
// ranking scores every match.
func BenchmarkSearch100k(b *testing.B) {
	skipLong(b)
	db := indexed(b, 100_000)
	ctx := context.Background()
	conn := rawConn(b, db.Path())
	for _, bc := range []struct{ name, query string }{
		{"common", taskgen.Words[0]},
		{"uncommon", taskgen.Words[len(taskgen.Words)-1]},
		{"rare", taskgen.RareWords[0]},
		{"two-words", "checkout button"},
		{"prefix", "chec"},
		{"ranked", "limit quota seat"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			matches := query(b, conn, `SELECT count(*) AS n FROM tasks_fts WHERE tasks_fts MATCH ?`, index.FTSQuery(bc.query))[0]["n"].(int64)
			if _, err := db.Search(ctx, bc.query, 20); err != nil { // a daemon's searches find its pages cached
				b.Fatal(err)
			}
			var hits int
			cpu := cpuTime()
			for b.Loop() {
				h, err := db.Search(ctx, bc.query, 20)
				if err != nil {
					b.Fatal(err)
				}
				hits = len(h)
			}
			reportMS(b, cpu)
			b.ReportMetric(float64(hits), "hits")
			b.ReportMetric(float64(matches), "matches")
		})
	}
}

// BenchmarkNext100k finds the next ready task among 100,000.
func BenchmarkNext100k(b *testing.B) {
	skipLong(b)
	db := indexed(b, 100_000)
	ctx := context.Background()
	cpu := cpuTime()
	for b.Loop() {
		row, rd, err := db.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if row == nil {
			b.Fatalf("nothing ready: %s", rd)
		}
	}
	reportMS(b, cpu)
}

// BenchmarkSyncFile re-indexes one changed file in a 10,000-task index.
func BenchmarkSyncFile(b *testing.B) {
	folder := generated(b, 10_000)
	db := indexed(b, 10_000)
	dir := openDir(b, folder)
	ctx := context.Background()
	entries, err := dir.List()
	if err != nil {
		b.Fatal(err)
	}
	name := entries[len(entries)/2].Name
	path := filepath.Join(folder, name)
	orig, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		os.WriteFile(path, orig, 0o644)
		db.SyncFile(ctx, dir, name)
	})
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		data := fmt.Appendf(append([]byte(nil), orig...), "\nEdit %d.\n", i)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c := cpuTime()
		fc, err := db.SyncFile(ctx, dir, name)
		cpu += cpuTime() - c
		if err != nil {
			b.Fatal(err)
		}
		if !fc.Updated {
			b.Fatalf("SyncFile did not update the row: %+v", fc)
		}
	}
	b.StopTimer()
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/op")
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkOps100k measures the other reads and writes a daemon makes on a
// queue of 100,000 tasks: get by alias and by id, the next alias number,
// the health counts, the problem list, and the whole snapshot plan.json is
// made from.
func BenchmarkOps100k(b *testing.B) {
	skipLong(b)
	db := indexed(b, 100_000)
	ctx := context.Background()
	byID, err := db.Get(ctx, queue.Ref{Num: 77_777})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		op   func() error
	}{
		{"get-alias", func() error { _, err := db.Get(ctx, queue.Ref{Num: 54_321}); return err }},
		{"get-id", func() error { _, err := db.Get(ctx, queue.Ref{ID: byID.ID}); return err }},
		{"next-key", func() error { _, err := db.NextKey(ctx); return err }},
		{"count", func() error { _, err := db.Count(ctx); return err }},
		{"problems", func() error { _, err := db.Problems(ctx); return err }},
		{"snapshot", func() error { _, _, err := db.Snapshot(ctx); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if err := bc.op(); err != nil {
					b.Fatal(err)
				}
			}
			reportMS(b, cpu)
		})
	}
}
