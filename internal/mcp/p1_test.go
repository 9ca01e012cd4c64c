package mcp_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskgen"
)

// TESTPLAN P1, the claim race: N real snag mcp processes drain a queue of
// open tasks, each in a loop of snag_claim (no id), a hold of 0-50 ms and
// snag_resolve, until claim answers task null. The project's config turns
// verify_on_resolve off, so a resolve goes straight to resolved. Every task
// must be claimed exactly once and be resolved at the end, in snagd's
// index and in its file, and no client may see SQLITE_BUSY or a 5xx (a 503
// the bridge retried is fine: snagd logs each, and they are counted).

// p1Config is the project config of the race: no verify step.
const p1Config = `{"version": 1, "plan": {"verify_on_resolve": false}}` + "\n"

// p1Write writes n tasks into the folder tasks: taskgen's (seed 7), each
// made open, vetted, unassigned and independent, so that every one is
// ready.
func p1Write(tasks string, n int) error {
	if err := os.MkdirAll(tasks, 0o755); err != nil {
		return err
	}
	for t := range taskgen.Tasks(n, 7) {
		t.Status, t.Trust, t.Assignee, t.DependsOn, t.Verified = queue.StatusOpen, queue.TrustVetted, "", nil, false
		if err := os.WriteFile(filepath.Join(tasks, queue.FileName(t.Key, t.Title)), codec.Format(t), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// p1Project makes a fresh project for one race: src's task files (or n
// new ones when src is ""), and the config.
func p1Project(tb testing.TB, src string, n int) string {
	tb.Helper()
	root := filepath.Join(tb.TempDir(), "proj")
	tasks := filepath.Join(root, ".snag", "tasks")
	var err error
	if src != "" {
		err = os.CopyFS(tasks, os.DirFS(filepath.Join(src, ".snag", "tasks")))
	} else {
		err = p1Write(tasks, n)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(root, ".snag", "config.json"), []byte(p1Config), 0o644)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return root
}

// p1Race is one race: its snagd and bridges, and what the agents saw.
type p1Race struct {
	d       *snagd
	bridges []*bridge

	mu        sync.Mutex
	claims    []time.Duration // claim round trips that got a task
	resolves  []time.Duration
	claimed   map[string]int // task key -> how many times an agent got it
	errs      []string       // every tool or protocol error an agent saw
	bad       []string       // those that name SQLITE_BUSY, a lock or a 5xx
	notDone   []string       // resolves that answered a status other than resolved
	lastEmpty string         // the reason of a claim that got no task
	wall      time.Duration  // from the first claim to the last resolve
}

// startP1 starts snagd on root (n tasks) and agents bridges, each of which
// lists the queue once, as an agent starts, and waits until every
// bridge's session is registered. (The go-sdk client speaks the
// sessionless protocol, without initialize: a bridge registers its
// session at its first tool call.)
func startP1(tb testing.TB, bin, root string, n, agents int) *p1Race {
	tb.Helper()
	r := &p1Race{d: startSnagd(tb, bin, root, n), claimed: map[string]int{}}
	for range agents {
		br := connect(tb, bin, r.d)
		br.mustTool(tb, "snag_list", map[string]any{"limit": 1})
		r.bridges = append(r.bridges, br)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := r.d.sessions()
		if err == nil && got == agents {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d sessions registered 30 s after %d bridges connected (%v); snagd's log:\n%s", got, agents, err, r.d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// badError reports whether an error a client saw is one P1 forbids: the
// database's busy or lock errors, or a 5xx, passed through to the model.
func badError(s string) bool {
	for _, w := range []string{"SQLITE_BUSY", "database is locked", "snag.db is locked", "answered 5", "Internal Server Error", "Service Unavailable", "internal"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func (r *p1Race) fail(agent int, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := fmt.Sprintf("agent %d: %s", agent, what)
	r.errs = append(r.errs, msg)
	if badError(what) {
		r.bad = append(r.bad, msg)
	}
}

// drain runs the agents until each has been told nothing is left.
func (r *p1Race) drain() {
	var wg sync.WaitGroup
	start := time.Now()
	for i, br := range r.bridges {
		wg.Go(func() { r.agent(i, br) })
	}
	wg.Wait()
	r.wall = time.Since(start)
}

// agent is one agent's loop: claim the next task, work on it for 0-50 ms,
// resolve it; until claim answers task null. It gives up after five
// errors in a row.
func (r *p1Race) agent(i int, br *bridge) {
	rng := rand.New(rand.NewPCG(uint64(i), 0x5031))
	for errors := 0; errors < 5; {
		res, err := br.tool("snag_claim", nil)
		if err != nil || res.res.IsError {
			r.fail(i, fmt.Sprintf("snag_claim: %v%s", err, res.text))
			errors++
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var out struct {
			Task   *struct{ Key string }
			Reason string
		}
		if err := json.Unmarshal(res.structure, &out); err != nil {
			r.fail(i, fmt.Sprintf("snag_claim: structuredContent %s: %v", res.structure, err))
			errors++
			continue
		}
		if out.Task == nil {
			r.mu.Lock()
			r.lastEmpty = out.Reason
			r.mu.Unlock()
			return
		}
		errors = 0
		key := out.Task.Key
		r.mu.Lock()
		r.claims = append(r.claims, res.took)
		r.claimed[key]++
		r.mu.Unlock()
		time.Sleep(time.Duration(rng.IntN(51)) * time.Millisecond)
		for attempt := 1; ; attempt++ {
			res, err := br.tool("snag_resolve", map[string]any{"id": key, "note": "p1 claim race"})
			if err == nil && !res.res.IsError {
				var mv struct{ Status string }
				json.Unmarshal(res.structure, &mv)
				r.mu.Lock()
				r.resolves = append(r.resolves, res.took)
				if mv.Status != string(queue.StatusResolved) {
					r.notDone = append(r.notDone, key+" "+mv.Status)
				}
				r.mu.Unlock()
				break
			}
			r.fail(i, fmt.Sprintf("snag_resolve %s (attempt %d): %v%s", key, attempt, err, res.text))
			if attempt == 3 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// stop closes the bridges (all at once) and stops snagd.
func (r *p1Race) stop() {
	var wg sync.WaitGroup
	for _, br := range r.bridges {
		wg.Go(br.close)
	}
	wg.Wait()
	r.d.stop()
}

// busyRetries counts the answers snagd gave up on because snag.db was
// busy: each is a 503 that the bridge retried, never seen by the agent.
func (r *p1Race) busyRetries() int {
	return strings.Count(r.d.log.String(), "gave up waiting for snag.db")
}

// p1Outcome is how the race left the queue.
type p1Outcome struct {
	dups    []string // tasks an agent got more than once
	missing []string // tasks never claimed, or not resolved in the index or the file
}

// check reads the end state from snagd's API (before stop) and from the
// task files, and compares it with what the agents saw.
func (r *p1Race) check(tb testing.TB, n int) p1Outcome {
	tb.Helper()
	var o p1Outcome
	api := map[string]string{}
	for cursor := ""; ; {
		var page struct {
			Tasks []struct{ Key, Status string }
			Next  string
		}
		if err := r.d.get("/tasks?all=true&limit=1000&cursor="+url.QueryEscape(cursor), &page); err != nil {
			tb.Fatalf("%v; snagd's log:\n%s", err, r.d.log.String())
		}
		for _, t := range page.Tasks {
			api[t.Key] = t.Status
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	files := map[string]string{}
	dir := filepath.Join(r.d.root, ".snag", "tasks")
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range ents {
		if !queue.IsTaskFileName(e.Name()) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		t, err := codec.Parse(raw)
		if err != nil {
			tb.Errorf("%s: %v", e.Name(), err)
			continue
		}
		files[t.Key] = string(t.Status)
	}
	if len(files) != n || len(api) != n {
		tb.Errorf("%d task files and %d tasks in snagd's list, want %d", len(files), len(api), n)
	}
	for key, st := range files {
		switch {
		case r.claimed[key] == 0:
			o.missing = append(o.missing, key+": never claimed")
		case st != string(queue.StatusResolved):
			o.missing = append(o.missing, key+": file says "+st)
		case api[key] != string(queue.StatusResolved):
			o.missing = append(o.missing, key+": snagd says "+api[key])
		}
	}
	for key, times := range r.claimed {
		if times > 1 {
			o.dups = append(o.dups, fmt.Sprintf("%s claimed %d times", key, times))
		}
	}
	return o
}

// report fails tb for what P1 forbids: duplicates, missing tasks, and
// busy errors or 5xx reaching a client.
func (o p1Outcome) report(tb testing.TB, r *p1Race) {
	tb.Helper()
	first := func(s []string) []string { return s[:min(len(s), 10)] }
	if len(o.dups) > 0 {
		tb.Errorf("%d tasks handed out twice: %v", len(o.dups), first(o.dups))
	}
	if len(o.missing) > 0 {
		tb.Errorf("%d tasks missing at the end (last empty claim said %q): %v", len(o.missing), r.lastEmpty, first(o.missing))
	}
	if len(r.bad) > 0 {
		tb.Errorf("%d busy or 5xx errors reached a client: %v", len(r.bad), first(r.bad))
	}
	if len(r.notDone) > 0 {
		tb.Errorf("%d resolves did not go straight to resolved with verify_on_resolve false: %v", len(r.notDone), first(r.notDone))
	}
}

// TestP1ClaimRace is P1 small: 4 agents drain 200 tasks. It asserts
// correctness only (run it with -race); BenchmarkP1ClaimRace measures.
func TestP1ClaimRace(t *testing.T) {
	t.Parallel()
	const n, agents = 200, 4
	r := startP1(t, snagBin, p1Project(t, "", n), n, agents)
	r.drain()
	o := r.check(t, n)
	r.stop()
	o.report(t, r)
	if len(r.errs) > 0 {
		t.Errorf("%d tool errors: %v", len(r.errs), r.errs[:min(len(r.errs), 10)])
	}
	t.Logf("%d agents, %d tasks in %v; snagd retried %d busy answers", agents, n, r.wall.Round(time.Millisecond), r.busyRetries())
}

// p1Size is the benchmark's size: -p1.tasks and -p1.agents, else 10,000
// tasks with SNAG_LONG=1, 400 with -short, 2,000 otherwise, and 20 agents.
func p1Size() (n, agents int) {
	n, agents = 2000, 20
	if os.Getenv("SNAG_LONG") != "" {
		n = 10_000
	}
	if testing.Short() {
		n = 400
	}
	if *p1Tasks > 0 {
		n = *p1Tasks
	}
	if *p1Agents > 0 {
		agents = *p1Agents
	}
	return n, agents
}

// BenchmarkP1ClaimRace is TESTPLAN P1: 20 real snag mcp processes, driven
// by the go-sdk client, drain a queue (see p1Size) with claim, a hold of
// 0-50 ms, resolve. One iteration is one whole drain on a fresh copy of
// the project and a fresh snagd (their start is not timed). It reports
// the claim round trip through the bridge, claim+resolve per second over
// the drain (the holds included: 20 agents holding 25 ms on average cap it
// near 800/s), snagd's peak resident set, the busy answers the bridges
// retried, and the errors agents saw; it fails on duplicates, missing
// tasks, or busy errors and 5xx reaching an agent.
func BenchmarkP1ClaimRace(b *testing.B) {
	n, agents := p1Size()
	bin := benchSnag(b)
	src := generated(b, fmt.Sprintf("p1-%d", n), func(tasks string) error { return p1Write(tasks, n) })
	var (
		claims, resolves []time.Duration
		wall             time.Duration
		done, errs, busy int
		hwm              float64
	)
	for b.Loop() {
		b.StopTimer()
		r := startP1(b, bin, p1Project(b, src, 0), n, agents)
		b.StartTimer()
		r.drain()
		b.StopTimer()
		hwm = max(hwm, r.d.peakMB())
		o := r.check(b, n)
		r.stop()
		o.report(b, r)
		for _, e := range r.errs[:min(len(r.errs), 5)] {
			b.Log(e)
		}
		claims, resolves = append(claims, r.claims...), append(resolves, r.resolves...)
		wall += r.wall
		done += len(r.resolves)
		errs += len(r.errs)
		busy += r.busyRetries()
		b.StartTimer()
	}
	logLoad(b)
	b.Logf("%d agents, %d tasks per drain", agents, n)
	b.ReportMetric(quantile(claims, 0.50), "claim-p50-ms")
	b.ReportMetric(quantile(claims, 0.99), "claim-p99-ms")
	b.ReportMetric(quantile(resolves, 0.50), "resolve-p50-ms")
	b.ReportMetric(quantile(resolves, 0.99), "resolve-p99-ms")
	b.ReportMetric(float64(done)/wall.Seconds(), "resolved/s")
	b.ReportMetric(hwm, "snagd-hwm-MB")
	b.ReportMetric(float64(busy), "busy-retries")
	b.ReportMetric(float64(errs), "errors")
}
