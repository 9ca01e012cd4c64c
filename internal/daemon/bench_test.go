package daemon_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/codec"
	snagd "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/taskgen"
)

// The benchmarks run snagd as a real process (built without the race
// detector) on generated projects and measure it from outside, through its
// HTTP API and /proc. They never fail on a missed target; they report
// figures with b.ReportMetric. The targets (DESIGN.md section 10 and
// TESTPLAN.md, P):
//
//	a person's edit of one task file visible through the API   p99 < 150 ms
//	claim-next, 16 clients, 10,000 tasks, fsynced file writes  >= 300 claims/s
//	GET /tasks?limit=20 on 100,000 tasks                       p50 < 5 ms
//	resident memory with 100,000 tasks                         < 150 MB
//	git checkout of 5,000 task files, converged (P3)           p95 <= 2 s
//
// Run them with make bench (full size) or make bench-short (-short: every
// size shrunk, well under a minute). With SNAG_BENCH_INPROC=1 the daemon
// runs inside the test process instead, so that go test -cpuprofile
// profiles it:
//
//	SNAG_BENCH_INPROC=1 go test -run '^$' -bench ClaimNext -cpuprofile cpu.out ./internal/daemon/
//	go tool pprof -top daemon.test cpu.out
//
// That profile holds the project's generation and snagd's start too. With
// SNAG_BENCH_CPUPROFILE=FILE as well, BenchmarkClaimNext profiles its
// claims alone into FILE. SNAG_BENCH_SNAGD=PATH runs that snagd program
// instead of building one, so that two builds (main's and a branch's, say)
// can be run in turn by the same benchmark:
//
//	SNAG_BENCH_SNAGD=/tmp/base/snagd go test -run '^$' -bench 'ClaimNext$' -benchtime 1x ./internal/daemon/

// benchSizes are the sizes of one run: full, or shrunk by -short.
type benchSizes struct {
	editTasks, edits                 int // project size, edits per iteration
	claimTasks, claims, claimClients int // project size, claims per iteration, clients
	listTasks, lists                 int // project size, lists per iteration
	checkoutCommon, checkoutDiff     int // task files on both branches, files that differ
	checkouts                        int // checkouts per iteration
}

func sizes() benchSizes {
	if testing.Short() {
		return benchSizes{editTasks: 1000, edits: 20, claimTasks: 2000, claims: 300, claimClients: 16,
			listTasks: 10000, lists: 200, checkoutCommon: 200, checkoutDiff: 500, checkouts: 4}
	}
	return benchSizes{editTasks: 10000, edits: 50, claimTasks: 10000, claims: 1000, claimClients: 16,
		listTasks: 100000, lists: 500, checkoutCommon: 1000, checkoutDiff: 5000, checkouts: 50}
}

var (
	benchMu      sync.Mutex
	benchFolders = map[int]string{} // generated projects by size, made once per process
)

// benchSnagd builds snagd without the race detector, once per process, next
// to the race-built one (TestMain removes that folder), or gives the program
// SNAG_BENCH_SNAGD names.
func benchSnagd(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("SNAG_BENCH_SNAGD"); bin != "" {
		return bin
	}
	bin, err := bins.Build("snagd-bench", snagdtest.Snagd)
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

// generatedProject returns the root of a project of n generated task files
// (taskgen, seed 1), written once per process. Benchmarks that only read
// and edit share it; ones that claim work on a copy.
func generatedProject(b *testing.B, n int) string {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if root, ok := benchFolders[n]; ok {
		return root
	}
	root := filepath.Join(bins.Path, fmt.Sprintf("project-%d", n))
	start := time.Now()
	if err := taskgen.Write(filepath.Join(root, ".snag", "tasks"), n, 1); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d task files in %v", n, time.Since(start).Round(time.Millisecond))
	benchFolders[n] = root
	return root
}

// projectCopy copies the task files of a generated project of n tasks into
// a fresh root.
func projectCopy(b *testing.B, n int) string {
	b.Helper()
	src := filepath.Join(generatedProject(b, n), ".snag", "tasks")
	root := b.TempDir()
	if err := os.CopyFS(filepath.Join(root, ".snag", "tasks"), os.DirFS(src)); err != nil {
		b.Fatal(err)
	}
	manyClaims(b, root) // each benchmark agent claims again and again without resolving
	return root
}

// benchDaemon is a snagd under measurement: a process of its own, or, with
// SNAG_BENCH_INPROC set, daemon.Run inside the test process.
type benchDaemon struct {
	root, home string
	pid        int
	port       int
	token      string
	cmd        *exec.Cmd
	log        *snagdtest.Buffer
	done       chan struct{}
	cancel     context.CancelFunc // in-process only
	client     *http.Client
	startup    time.Duration // from start to ready
}

func inProcess() bool { return os.Getenv("SNAG_BENCH_INPROC") != "" }

// startBench starts snagd on root and waits until it is ready. It is
// stopped when the benchmark ends, or earlier by stop.
func startBench(b *testing.B, root string) *benchDaemon {
	b.Helper()
	port := snagdtest.FreePort(b)
	d := &benchDaemon{root: root, home: filepath.Join(b.TempDir(), "home"), port: port, log: &snagdtest.Buffer{},
		done: make(chan struct{}), client: newClient()}
	start := time.Now()
	if inProcess() {
		ctx, cancel := context.WithCancel(context.Background())
		d.cancel, d.pid = cancel, os.Getpid()
		go func() {
			defer close(d.done)
			if err := snagd.Run(ctx, snagd.Options{Root: root, Port: port, Home: d.home}); err != nil {
				fmt.Fprintln(d.log, "run:", err)
			}
		}()
	} else {
		d.cmd = exec.Command(benchSnagd(b), "--root", root, "--port", strconv.Itoa(port), "--log", "info")
		d.cmd.Env = append(os.Environ(), "SNAG_HOME="+d.home)
		d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
		if err := d.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		d.pid = d.cmd.Process.Pid
		go func() { d.cmd.Wait(); close(d.done) }()
	}
	b.Cleanup(d.stop)
	deadline := time.Now().Add(10 * time.Minute) // a cold index of 100,000 files takes a while
	for {
		select {
		case <-d.done:
			b.Fatalf("snagd exited\n%s", d.log.String())
		default:
		}
		var h struct {
			Ready bool
			PID   int
		}
		if resp, err := d.client.Get(d.url("/health")); err == nil {
			json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
		}
		if h.Ready && h.PID == d.pid {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("snagd not ready in time\n%s", d.log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.startup = time.Since(start)
	tok, err := os.ReadFile(filepath.Join(d.home, "token"))
	if err != nil {
		b.Fatal(err)
	}
	d.token = strings.TrimSpace(string(tok))
	return d
}

// stop ends snagd cleanly and waits for it.
func (d *benchDaemon) stop() {
	if d.cancel != nil {
		d.cancel()
	} else {
		d.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		if d.cmd != nil {
			d.cmd.Process.Kill()
			<-d.done
		}
	}
}

// newClient is an HTTP client with its own connections: one per simulated
// agent, as each agent is its own process.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
}

func (d *benchDaemon) url(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(d.port) + path
}

// call sends an authorized request through c (d's client when nil), acting
// for session when it is not 0, and returns the status and body.
func (d *benchDaemon) call(c *http.Client, method, path string, session int64, in any) (int, []byte, error) {
	if c == nil {
		c = d.client
	}
	var body io.Reader
	if in != nil {
		raw, _ := json.Marshal(in)
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, d.url(path), body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if session != 0 {
		req.Header.Set(snagd.SessionHeader, strconv.FormatInt(session, 10))
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// memory reads snagd's resident set and its peak, in MB, from /proc.
func (d *benchDaemon) memory() (rss, hwm float64) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(d.pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "VmRSS" && k != "VmHWM" {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if k == "VmRSS" {
			rss = kb / 1024
		} else {
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// cpu reads the processor time snagd has used, user and system, from /proc.
func (d *benchDaemon) cpu() time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(d.pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15 overall, in clock ticks
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100
}

// events follows /events and records when each event arrived.
type events struct {
	mu     sync.Mutex
	count  int
	last   time.Time
	reason []string // the reasons of every rescan event
	wake   chan struct{}
}

func (d *benchDaemon) follow(b *testing.B) *events {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url("/events"), nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := newClient().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	ev := &events{wake: make(chan struct{}, 1)}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		typ := ""
		for sc.Scan() {
			line := sc.Text()
			if t, ok := strings.CutPrefix(line, "event: "); ok {
				typ = t
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			ev.mu.Lock()
			ev.count++
			ev.last = time.Now()
			if typ == "rescan" {
				var r struct{ Reasons []string }
				json.Unmarshal([]byte(data), &r)
				ev.reason = append(ev.reason, r.Reasons...)
			}
			ev.mu.Unlock()
			select {
			case ev.wake <- struct{}{}:
			default:
			}
		}
	}()
	return ev
}

func (e *events) state() (int, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.count, e.last
}

// quiet waits until no event has come for gap.
func (e *events) quiet(gap time.Duration) {
	for {
		_, last := e.state()
		if wait := time.Until(last.Add(gap)); wait > 0 {
			time.Sleep(wait)
			continue
		}
		return
	}
}

// percentile returns the q-quantile of ds (nearest rank), in milliseconds.
func percentile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return float64(s[max(i, 0)]) / float64(time.Millisecond)
}

// BenchmarkEditVisible measures how long a person's edit of one task file
// (its title changed, the file written in place) takes to be visible
// through GET /tasks/{ref}: the watcher's coalescing (50 ms of quiet) is
// included. One iteration is a run of edits to different files.
func BenchmarkEditVisible(b *testing.B) {
	sz := sizes()
	root := generatedProject(b, sz.editTasks)
	d := startBench(b, root)
	type target struct {
		key, path, title string
	}
	var targets []target
	for t := range taskgen.Tasks(min(sz.editTasks, 500), 1) {
		targets = append(targets, target{t.Key, filepath.Join(root, ".snag", "tasks", queue.FileName(t.Key, t.Title)), t.Title})
	}
	var lat []time.Duration
	edit := 0
	for b.Loop() {
		for range sz.edits {
			edit++
			tg := targets[edit%len(targets)]
			cur, err := os.ReadFile(tg.path)
			if err != nil {
				b.Fatal(err)
			}
			title := fmt.Sprintf("%s (edit %d)", tg.title, edit)
			next, err := codec.Edit(cur, codec.Set("title", title))
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := os.WriteFile(tg.path, next, 0o644); err != nil {
				b.Fatal(err)
			}
			for {
				var v struct{ Row struct{ Title string } }
				if code, body, err := d.call(nil, "GET", "/tasks/"+tg.key, 0, nil); err == nil && code == 200 {
					json.Unmarshal(body, &v)
				}
				if v.Row.Title == title {
					break
				}
				if time.Since(start) > 30*time.Second {
					b.Fatalf("edit of %s not visible after 30 s\n%s", tg.key, d.log.String())
				}
				time.Sleep(time.Millisecond)
			}
			lat = append(lat, time.Since(start))
			time.Sleep(10 * time.Millisecond) // a person does not save two files in the same instant
		}
	}
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
	b.ReportMetric(float64(len(lat)), "edits")
	slow := make([]int, len(lat))
	for i := range slow {
		slow[i] = i
	}
	slices.SortFunc(slow, func(x, y int) int { return cmp.Compare(lat[y], lat[x]) })
	for _, i := range slow[:min(5, len(slow))] {
		b.Logf("edit %d of %d took %v", i+1, len(lat), lat[i].Round(time.Millisecond))
	}
}

// claimer is one simulated agent: its own connections, its own session,
// whose stream it holds open.
type claimer struct {
	c       *http.Client
	session int64
}

func registerClaimers(b *testing.B, d *benchDaemon, n int) []*claimer {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	cs := make([]*claimer, n)
	for i := range cs {
		c := &claimer{c: newClient()}
		code, body, err := d.call(c.c, "POST", "/sessions", 0, map[string]any{"client": "bench", "client_version": "1",
			"pid": os.Getpid(), "transport": "http"})
		if err != nil || code != http.StatusCreated {
			b.Fatalf("register: %d %s %v", code, body, err)
		}
		var s struct{ ID int64 }
		json.Unmarshal(body, &s)
		c.session = s.ID
		req, _ := http.NewRequestWithContext(ctx, "GET", d.url("/sessions/"+strconv.FormatInt(s.ID, 10)+"/stream"), nil)
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp, err := c.c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("stream: %v", err)
		}
		go func() { io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
		cs[i] = c
	}
	return cs
}

// readyCount counts the tasks claim-next could hand out: open, clean, not
// blocked.
func readyCount(b *testing.B, d *benchDaemon) int {
	b.Helper()
	n, cursor := 0, ""
	for {
		code, body, err := d.call(nil, "GET", "/tasks?status=open&limit=1000&cursor="+url.QueryEscape(cursor), 0, nil)
		if err != nil || code != 200 {
			b.Fatalf("list: %d %v", code, err)
		}
		var page struct {
			Tasks []struct {
				State     string
				Duplicate bool
				BlockedBy []string `json:"blocked_by"`
			}
			Next string
		}
		json.Unmarshal(body, &page)
		for _, t := range page.Tasks {
			if t.State == "ok" && !t.Duplicate && len(t.BlockedBy) == 0 {
				n++
			}
		}
		if page.Next == "" {
			return n
		}
		cursor = page.Next
	}
}

// BenchmarkClaimNext measures claim-next throughput: 16 agents with their
// own sessions and connections claim the next ready task as fast as snagd
// hands them out, each claim a fsynced rewrite of the task file inside an
// immediate transaction. One iteration is a fixed number of claims; a
// fresh copy of the project is started when too few ready tasks are left.
func BenchmarkClaimNext(b *testing.B) {
	sz := sizes()
	var (
		d     *benchDaemon
		cs    []*claimer
		ready int
		lat   []time.Duration
		total int
		busy  time.Duration
		cpu   time.Duration // snagd's processor time while it served the claims
		seen  = map[string]bool{}
		dups  int
		errs  atomic.Int64
		fresh = func() {
			if d != nil {
				d.stop()
			}
			d = startBench(b, projectCopy(b, sz.claimTasks))
			cs = registerClaimers(b, d, sz.claimClients)
			ready = readyCount(b, d)
			clear(seen)
		}
	)
	fresh()
	if ready < sz.claims {
		b.Fatalf("only %d ready tasks for %d claims per iteration", ready, sz.claims)
	}
	b.Logf("%d tasks, %d ready, %d clients", sz.claimTasks, ready, sz.claimClients)
	defer profileClaims(b)()
	for b.Loop() {
		if ready < sz.claims {
			b.StopTimer()
			fresh()
			b.StartTimer()
		}
		var (
			left = atomic.Int64{}
			mu   sync.Mutex
			wg   sync.WaitGroup
		)
		left.Store(int64(sz.claims))
		cpu0 := d.cpu()
		start := time.Now()
		for _, c := range cs {
			wg.Go(func() {
				var mine []time.Duration
				var keys []string
				for left.Add(-1) >= 0 {
					t0 := time.Now()
					code, body, err := d.call(c.c, "POST", "/claim", c.session, map[string]any{})
					took := time.Since(t0)
					var out struct{ Task *struct{ Key string } }
					if err == nil {
						err = json.Unmarshal(body, &out)
					}
					if err != nil || code != 200 || out.Task == nil {
						if errs.Add(1) <= 5 {
							b.Logf("claim: %d %s %v", code, body, err)
						}
						continue
					}
					mine = append(mine, took)
					keys = append(keys, out.Task.Key)
				}
				mu.Lock()
				lat = append(lat, mine...)
				for _, k := range keys {
					if seen[k] {
						dups++
					}
					seen[k] = true
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		busy += time.Since(start)
		cpu += d.cpu() - cpu0
		total += sz.claims
		ready -= sz.claims
	}
	if dups > 0 {
		b.Errorf("%d tasks were handed out twice", dups)
	}
	b.ReportMetric(float64(len(lat))/busy.Seconds(), "claims/s")
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
	b.ReportMetric(float64(errs.Load()), "errors")
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(max(len(lat), 1)), "cpu-ms/claim")
}

// profileClaims starts a CPU profile into the file SNAG_BENCH_CPUPROFILE
// names, when it is set and snagd runs in the test process, and returns
// the function that stops it.
func profileClaims(b *testing.B) func() {
	name := os.Getenv("SNAG_BENCH_CPUPROFILE")
	if name == "" || !inProcess() {
		return func() {}
	}
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("%v (leave -cpuprofile out with SNAG_BENCH_CPUPROFILE)", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkLargeQueue starts snagd on the largest generated project (100,000
// tasks; 10,000 with -short) and measures, on one daemon: the start, a
// page of the default list, and resident memory after start and after the
// lists. The first start builds the index from nothing; the daemon
// measured is a second start, on the index the first one built.
func BenchmarkLargeQueue(b *testing.B) {
	sz := sizes()
	root := generatedProject(b, sz.listTasks)
	os.Remove(filepath.Join(root, ".snag", "snag.db")) // a cold start, whatever ran before
	cold := startBench(b, root)
	_, coldHWM := cold.memory()
	cold.stop()
	d := startBench(b, root)
	startRSS, startHWM := d.memory()
	b.Logf("%d tasks: cold start %v (peak %.0f MB), warm start %v", sz.listTasks,
		cold.startup.Round(time.Millisecond), coldHWM, d.startup.Round(time.Millisecond))

	b.Run("ListLimit20", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			for range sz.lists {
				t0 := time.Now()
				code, body, err := d.call(nil, "GET", "/tasks?limit=20", 0, nil)
				lat = append(lat, time.Since(t0))
				if err != nil || code != 200 || !bytes.Contains(body, []byte(`"next"`)) {
					b.Fatalf("list: %d %v %.200s", code, err, body)
				}
			}
		}
		b.ReportMetric(percentile(lat, 0.50), "p50-ms")
		b.ReportMetric(percentile(lat, 0.99), "p99-ms")
	})
	b.Run("Memory", func(b *testing.B) {
		var rss, hwm float64
		for b.Loop() {
			rss, hwm = d.memory()
		}
		b.ReportMetric(startRSS, "rss-start-MB")
		b.ReportMetric(startHWM, "hwm-start-MB")
		b.ReportMetric(rss, "rss-after-list-MB")
		b.ReportMetric(hwm, "hwm-MB")
		b.ReportMetric(coldHWM, "hwm-cold-MB")
		b.ReportMetric(cold.startup.Seconds(), "cold-start-s")
		b.ReportMetric(d.startup.Seconds(), "warm-start-s")
	})
}

// checkoutRepo is a git repository in a temporary folder with two
// branches, a and b, whose task files differ in diff files: on b, half of
// them are a's tasks with a new title, a quarter of a's are gone, and a
// quarter are new. common more are the same on both.
type checkoutRepo struct {
	root string
	want map[string]map[string]string // branch -> key -> title
}

func newCheckoutRepo(b *testing.B, common, diff int) *checkoutRepo {
	b.Helper()
	root := b.TempDir()
	tasks := filepath.Join(root, ".snag", "tasks")
	if err := os.MkdirAll(tasks, 0o755); err != nil {
		b.Fatal(err)
	}
	modified, removed := diff/2, diff/4
	added := diff - modified - removed
	onA := common + modified + removed
	r := &checkoutRepo{root: root, want: map[string]map[string]string{"a": {}, "b": {}}}
	git := func(args ...string) {
		b.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@example.com"}, args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(name string, t *queue.Task) {
		if err := os.WriteFile(filepath.Join(tasks, name), codec.Format(t), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var all []*queue.Task
	for t := range taskgen.Tasks(onA+added, 1) {
		all = append(all, t)
	}
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = queue.FileName(t.Key, t.Title)
	}
	os.WriteFile(filepath.Join(root, ".gitignore"), []byte(".snag/*\n!.snag/tasks/\n"), 0o644)
	for i, t := range all[:onA] {
		write(names[i], t)
		r.want["a"][t.Key] = t.Title
	}
	git("init", "-q", "-b", "a")
	git("add", ".")
	git("commit", "-q", "-m", "a")
	git("checkout", "-q", "-b", "b")
	for i, t := range all {
		switch {
		case i < common:
			r.want["b"][t.Key] = t.Title
		case i < common+modified:
			t2 := *t
			t2.Title = "Reworked: " + t.Title
			write(names[i], &t2)
			r.want["b"][t.Key] = t2.Title
		case i < onA:
			os.Remove(filepath.Join(tasks, names[i]))
		default:
			write(names[i], t)
			r.want["b"][t.Key] = t.Title
		}
	}
	git("add", "-A", ".")
	git("commit", "-q", "-m", "b")
	git("checkout", "-q", "a")
	return r
}

// matches reports whether the daemon's list of every task is the branch's
// set of tasks, each with the title its file has. A claimed task whose file
// the branch lacks is listed too, as missing (it keeps its lease until its
// file is back), and counts as absent.
func (r *checkoutRepo) matches(d *benchDaemon, branch string) bool {
	want := r.want[branch]
	got, cursor := 0, ""
	for {
		code, body, err := d.call(nil, "GET", "/tasks?all=true&limit=1000&cursor="+url.QueryEscape(cursor), 0, nil)
		if err != nil || code != 200 {
			return false
		}
		var page struct {
			Tasks []struct{ Key, Title, State string }
			Next  string
		}
		if json.Unmarshal(body, &page) != nil {
			return false
		}
		for _, t := range page.Tasks {
			title, ok := want[t.Key]
			if t.State == api.StateMissing && !ok {
				continue // a claimed task whose file the branch lacks keeps its row, as missing
			}
			if !ok || title != t.Title || t.State == api.StateMissing {
				return false
			}
			got++
		}
		if page.Next == "" {
			return got == len(want)
		}
		cursor = page.Next
	}
}

// BenchmarkCheckout is TESTPLAN P3: git checkout between two branches whose
// task files differ in 5,000 files (500 with -short), back and forth. It
// measures the time from the end of the checkout until the daemon has
// converged: its list of tasks equals the files. That is the arrival of the
// last change event before a full comparison that found them equal, with
// no event during it. With Overflow, snagd is stopped (SIGSTOP) during the
// checkout and a storm of ignored files overflows its kernel event queue,
// so it converges by a rescan; time runs from SIGCONT.
func BenchmarkCheckout(b *testing.B) {
	sz := sizes()
	repo := newCheckoutRepo(b, sz.checkoutCommon, sz.checkoutDiff)
	d := startBench(b, repo.root)
	ev := d.follow(b)
	branch := "a"
	if !repo.matches(d, branch) {
		b.Fatalf("index does not match branch a after start")
	}
	checkout := func(b *testing.B, overflow bool) (gitTook, converge time.Duration) {
		b.Helper()
		next := map[string]string{"a": "b", "b": "a"}[branch]
		if overflow {
			d.cmd.Process.Signal(syscall.SIGSTOP)
		}
		t0 := time.Now()
		cmd := exec.Command("git", "checkout", "-q", next)
		cmd.Dir = repo.root
		if out, err := cmd.CombinedOutput(); err != nil {
			d.cmd.Process.Signal(syscall.SIGCONT)
			b.Fatalf("git checkout %s: %v\n%s", next, err, out)
		}
		gitTook = time.Since(t0)
		if overflow {
			storm(b, filepath.Join(repo.root, ".snag", "tasks"), 10000)
		}
		start := time.Now()
		if overflow {
			d.cmd.Process.Signal(syscall.SIGCONT)
		}
		branch = next
		for {
			ev.quiet(100 * time.Millisecond)
			n0, last := ev.state()
			ok := repo.matches(d, branch)
			if n1, _ := ev.state(); ok && n1 == n0 {
				return gitTook, max(last.Sub(start), 0)
			}
			if time.Since(start) > 2*time.Minute {
				b.Fatalf("not converged on %s after 2 minutes\n%s", branch, d.log.String())
			}
			select { // something is still to come
			case <-ev.wake:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for _, overflow := range []bool{false, true} {
		name := "Watched"
		if overflow {
			name = "Overflow"
		}
		b.Run(name, func(b *testing.B) {
			if overflow && inProcess() {
				b.Skip("needs snagd as a process of its own, to stop it")
			}
			var conv, gits []time.Duration
			ev.mu.Lock()
			before := len(ev.reason)
			ev.mu.Unlock()
			for b.Loop() {
				for range sz.checkouts {
					g, c := checkout(b, overflow)
					gits, conv = append(gits, g), append(conv, c)
				}
			}
			ev.mu.Lock()
			overflows := 0
			for _, r := range ev.reason[before:] {
				if r == "overflow" {
					overflows++
				}
			}
			ev.mu.Unlock()
			b.ReportMetric(percentile(conv, 0.50), "p50-ms")
			b.ReportMetric(percentile(conv, 0.95), "p95-ms")
			b.ReportMetric(percentile(conv, 1), "max-ms")
			b.ReportMetric(percentile(gits, 0.50), "git-p50-ms")
			b.ReportMetric(float64(overflows), "overflows")
			b.ReportMetric(float64(len(conv)), "checkouts")
		})
	}
}

// storm makes n files that snagd ignores and removes them again: twice n
// events, more than the kernel queues for a stopped reader.
func storm(b *testing.B, dir string, n int) {
	b.Helper()
	for i := range n {
		p := filepath.Join(dir, "storm-"+strconv.Itoa(i)+".md.swp")
		if err := os.WriteFile(p, nil, 0o644); err != nil && !errors.Is(err, os.ErrExist) {
			b.Fatal(err)
		}
		os.Remove(p)
	}
}
