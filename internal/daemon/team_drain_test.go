package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/coord"
	daemonpkg "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/pgtest"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snagdtest"
)

// Issue 17's drain (TESTPLAN T2, T3): the clones of one bare repository,
// each with its snagd on one PostgreSQL, and real snag mcp agents (the
// bridge is snagd's own program run as "snagd snag mcp", driven by the
// go-sdk client over stdio) that drain the queue with snag_claim (no id:
// claim-next) and snag_resolve. The project resolves without verify.
//
// The tests assert correctness only; the benchmarks measure. Sizes:
//
//	TestTeamDrainThreeClonesMCP    3,000 tasks, 30 agents (-short: 300, 9)
//	TestTeamDrainKilledCloneMCP    300 tasks, 9 agents (-short: 150, 6)
//	BenchmarkTeamClaims            3,000 tasks, 30 agents (-short: 300, 9)
//	BenchmarkTeamEventLatency      200 claims (-short: 50)
//	BenchmarkTeamHeartbeatLoad     0, 100 and 300 idle agents, 20 s each (-short: 5 s)
//
// The tests run the race-built snagd (bridges included); the benchmarks
// build snagd without the race detector:
//
//	go test -race -run 'TestTeamDrain' ./daemon/
//	go test -run '^$' -bench Team -benchtime 1x ./daemon/

// drainSize is the size of TestTeamDrainThreeClonesMCP: tasks and agents.
func drainSize() (tasks, agents int) {
	if testing.Short() {
		return 300, 9
	}
	return 3000, 30
}

// drainDeadline bounds one agent's drain: past it the agent stops and says
// so.
const drainDeadline = 5 * time.Minute

// drainBridge is one agent's snag mcp process with the go-sdk client
// connected to it.
type drainBridge struct {
	cs    *sdk.ClientSession
	log   *snagdtest.Buffer // its stderr
	close func()            // closes stdin and waits for the process; once
}

// startDrainBridge runs "bin snag mcp" in the project root, as an agent's
// client does, with the snagd's SNAG_HOME (so it finds the token) and no
// autostart (so it never starts a snagd of its own: while its snagd is
// down it says so, and finds it again once it is back). The caller closes
// it.
func startDrainBridge(bin, root, home string) (*drainBridge, error) {
	cmd := exec.Command(bin, "snag", "mcp")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SNAG_HOME="+home, "SNAG_NO_AUTOSTART=1", "SNAG_AGENT=")
	br := &drainBridge{log: &snagdtest.Buffer{}}
	cmd.Stderr = br.log
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "team-drain", Version: "1.0"}, nil).
		Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect snag mcp: %v\n%s", err, br.log.String())
	}
	br.cs = cs
	br.close = sync.OnceFunc(func() { cs.Close() })
	return br, nil
}

// drainAnswer is one tool call's answer, timed.
type drainAnswer struct {
	text      string
	structure []byte // structuredContent, as JSON
	isError   bool
	took      time.Duration
}

// tool calls a tool; the error is a protocol error only, a tool error is
// isError with the words in text. It is safe for concurrent use.
func (br *drainBridge) tool(name string, args map[string]any) (drainAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if args == nil {
		args = map[string]any{}
	}
	t0 := time.Now()
	res, err := br.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	a := drainAnswer{took: time.Since(t0)}
	if err != nil {
		return a, fmt.Errorf("%s: %w", name, err)
	}
	a.isError = res.IsError
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			a.text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		a.structure, _ = json.Marshal(res.StructuredContent)
	}
	return a, nil
}

// transient reports whether a tool error's words say to call again: the
// bridge's snagd is down, or its coordination store out of reach.
func transient(text string) bool {
	for _, w := range []string{"cannot be reached", "no snagd", "unreachable", "try again"} {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// drainAgent is one agent of a drain, on clone (an index into the
// drain's clones).
type drainAgent struct {
	id, clone int
	br        *drainBridge
}

// drainClaim is one claim an agent was granted.
type drainClaim struct {
	key   string
	agent int // -1: the test's own HTTP agent
	clone int
	epoch int64 // the shared lease's epoch right after the grant (0 when not read)
}

// drainGate holds agents between a claim and its resolve while it is
// closed: they keep their leases meanwhile. A nil gate never holds.
type drainGate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
	parked int
}

func newDrainGate() *drainGate {
	g := &drainGate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// pass waits while the gate is closed.
func (g *drainGate) pass() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.parked++
	for g.closed {
		g.cond.Wait()
	}
	g.parked--
}

func (g *drainGate) set(closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = closed
	g.cond.Broadcast()
}

// waiting is how many agents the gate holds.
func (g *drainGate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.parked
}

// drainRace is one drain: its agents, and what they saw.
type drainRace struct {
	agents []*drainAgent
	// epoch, when set, reads the epoch of the shared lease the agent on
	// clone was just granted for key, failing when the store does not
	// show it held by that clone.
	epoch func(clone int, key string) (int64, error)
	// left, when set, is asked when a claim got no task: how many tasks
	// the shared state has neither held nor done (open), and how many are
	// not done. The agent stops once every task is done, else it asks
	// again after emptyWait. Unset, the first claim that gets no task
	// stops the agent, as a real agent stops.
	left      func() (open, undone int, err error)
	emptyWait time.Duration
	gate      *drainGate // nil: no gate

	mu         sync.Mutex
	claims     []drainClaim
	claimLat   []time.Duration // claims that got a task
	claimAt    []time.Time     // when each was answered
	resolveLat []time.Duration
	resolved   map[string][]int // task key -> the agents whose resolve was acknowledged
	refused    []string         // resolves refused for good, with the words
	errs       []string         // every other tool or protocol error
	retried    int              // tool errors that said to call again
	// falseEmpty counts the claims that got no task ("nothing is ready")
	// while the shared state had open tasks left (known only with left).
	falseEmpty int
	wall       time.Duration // from the first claim to the last agent's end
}

func (r *drainRace) fail(a *drainAgent, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf("agent %d (clone %d): ", a.id, a.clone+1)+fmt.Sprintf(format, args...))
}

// run drains: each agent in a loop of claim and resolve until it stops.
func (r *drainRace) run() {
	var wg sync.WaitGroup
	start := time.Now()
	for _, a := range r.agents {
		wg.Go(func() { r.agent(a) })
	}
	wg.Wait()
	r.wall = time.Since(start)
}

func (r *drainRace) agent(a *drainAgent) {
	deadline := time.Now().Add(drainDeadline)
	for time.Now().Before(deadline) {
		ans, err := a.br.tool("snag_claim", nil)
		if err != nil {
			r.fail(a, "%v\n%s", err, a.br.log.String())
			return
		}
		if ans.isError {
			if !transient(ans.text) {
				r.fail(a, "snag_claim: %s", ans.text)
			}
			r.mu.Lock()
			r.retried++
			r.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var out struct {
			Task *struct{ Key string }
		}
		if err := json.Unmarshal(ans.structure, &out); err != nil {
			r.fail(a, "snag_claim: structuredContent %s: %v", ans.structure, err)
			return
		}
		if out.Task == nil {
			if r.left == nil {
				return
			}
			open, undone, err := r.left()
			if err != nil {
				r.fail(a, "read the shared state: %v", err)
				return
			}
			if open > 0 {
				r.mu.Lock()
				r.falseEmpty++
				r.mu.Unlock()
			}
			if undone == 0 {
				return
			}
			time.Sleep(r.emptyWait)
			continue
		}
		c := drainClaim{key: out.Task.Key, agent: a.id, clone: a.clone}
		if r.epoch != nil {
			if c.epoch, err = r.epoch(a.clone, c.key); err != nil {
				r.fail(a, "the claim of %s was answered: %v", c.key, err)
			}
		}
		r.mu.Lock()
		r.claims = append(r.claims, c)
		r.claimLat = append(r.claimLat, ans.took)
		r.claimAt = append(r.claimAt, time.Now())
		r.mu.Unlock()
		r.gate.pass()
		r.resolve(a, c.key, deadline)
	}
	r.fail(a, "still draining after %v", drainDeadline)
}

// resolve resolves key, calling again while the answer says to.
func (r *drainRace) resolve(a *drainAgent, key string, deadline time.Time) {
	for {
		ans, err := a.br.tool("snag_resolve", map[string]any{"id": key, "note": "team drain"})
		if err != nil {
			r.fail(a, "%v\n%s", err, a.br.log.String())
			return
		}
		if !ans.isError {
			var mv struct{ Status string }
			json.Unmarshal(ans.structure, &mv)
			r.mu.Lock()
			defer r.mu.Unlock()
			if mv.Status != string(queue.StatusResolved) {
				r.errs = append(r.errs, fmt.Sprintf("agent %d: resolve %s: %s, want resolved (verify is off)", a.id, key, mv.Status))
			}
			r.ackedLocked(key, a.id)
			r.resolveLat = append(r.resolveLat, ans.took)
			return
		}
		if transient(ans.text) && time.Now().Before(deadline) {
			r.mu.Lock()
			r.retried++
			r.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
			continue
		}
		r.mu.Lock()
		r.refused = append(r.refused, fmt.Sprintf("%s by agent %d (clone %d): %s", key, a.id, a.clone+1, ans.text))
		r.mu.Unlock()
		return
	}
}

// ackedLocked records agent's acknowledged resolve of key; r.mu is held.
func (r *drainRace) ackedLocked(key string, agent int) {
	if r.resolved == nil {
		r.resolved = map[string][]int{}
	}
	r.resolved[key] = append(r.resolved[key], agent)
}

// epochsTwice reports the (task, epoch) pairs granted more than once: two
// agents holding one task's lease at one time.
func (r *drainRace) epochsTwice() []string {
	seen := map[string]drainClaim{}
	var out []string
	for _, c := range r.claims {
		k := fmt.Sprintf("%s@%d", c.key, c.epoch)
		if was, dup := seen[k]; dup {
			out = append(out, fmt.Sprintf("%s granted to agent %d (clone %d) and agent %d (clone %d)", k, was.agent, was.clone+1, c.agent, c.clone+1))
		}
		seen[k] = c
	}
	return out
}

// rates is the claims answered per second in each third of the drain, by
// the order they were answered: a rate that falls as the drain goes on is
// a cost that grows with the tasks done.
func (r *drainRace) rates() []float64 {
	at := slices.Clone(r.claimAt)
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	var out []float64
	for i := range 3 {
		lo, hi := i*len(at)/3, (i+1)*len(at)/3-1
		if hi > lo {
			out = append(out, float64(hi-lo)/at[hi].Sub(at[lo]).Seconds())
		}
	}
	return out
}

// first is at most ten of s, for a message.
func first(s []string) []string { return s[:min(len(s), 10)] }

// drainLease is a task's row in the shared state.
type drainLease struct {
	epoch int64
	state string
	root  string // the root of the clone that holds it or ended it last
}

// sharedLeases reads every task's shared lease, by key, from the
// coordination store's database directly (one workspace per database).
func sharedLeases(ctx context.Context, pool *pgxpool.Pool) (map[string]drainLease, error) {
	rows, err := pool.Query(ctx, `SELECT l.key, l.epoch, l.state, coalesce(c.root, '') FROM leases l LEFT JOIN clones c ON c.id = l.clone`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]drainLease{}
	for rows.Next() {
		var key string
		var l drainLease
		if err := rows.Scan(&key, &l.epoch, &l.state, &l.root); err != nil {
			return nil, err
		}
		out[key] = l
	}
	return out, rows.Err()
}

// sharedLeaseOf reads task key's shared lease.
func sharedLeaseOf(ctx context.Context, pool *pgxpool.Pool, key string) (drainLease, error) {
	var l drainLease
	err := pool.QueryRow(ctx, `SELECT l.epoch, l.state, coalesce(c.root, '') FROM leases l LEFT JOIN clones c ON c.id = l.clone WHERE l.key = $1`, key).
		Scan(&l.epoch, &l.state, &l.root)
	return l, err
}

// drainPool is a small connection pool to the coordination store's
// database, for the test's own reads; closed when the test ends.
func drainPool(tb testing.TB, dsn string) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatal("parse the DSN") // never the DSN itself: it holds the password
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// leftIn reads, of n tasks, how many the shared state has neither held
// nor done (open), and how many are not done.
func leftIn(ctx context.Context, pool *pgxpool.Pool, n int) (open, undone int, err error) {
	var held, done int
	err = pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'held'), count(*) FILTER (WHERE state = 'done') FROM leases`).Scan(&held, &done)
	return n - held - done, n - done, err
}

// waitPublished waits until each of clones clones has published n ready
// tasks to the store, so that claim-next finds every task from the start.
func waitPublished(tb testing.TB, pool *pgxpool.Pool, clones, n int) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var got int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT clone FROM ready GROUP BY clone HAVING count(*) = $1) c`, n).Scan(&got)
		if err == nil && got >= clones {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d clones published their %d ready tasks within a minute (%v)", got, clones, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drainAgents starts total bridges, on the clones in turn (root and home
// of each clone's snagd), and has each list the queue once, as an agent
// starts, which registers its session. The bridges are closed when the
// test ends.
func drainAgents(tb testing.TB, bin string, roots, homes []string, total int) []*drainAgent {
	tb.Helper()
	agents := make([]*drainAgent, total)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for i := range agents {
		c := i % len(roots)
		wg.Go(func() {
			br, err := startDrainBridge(bin, roots[c], homes[c])
			if err == nil {
				tb.Cleanup(br.close)
				var ans drainAnswer
				if ans, err = br.tool("snag_list", map[string]any{"limit": 1}); err == nil && ans.isError {
					err = fmt.Errorf("snag_list: %s\n%s", ans.text, br.log.String())
				}
				agents[i] = &drainAgent{id: i, clone: c, br: br}
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("agent %d: %v", i, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		tb.Fatalf("%d of %d agents could not start: %v", len(errs), total, first(errs))
	}
	return agents
}

// fileStatuses reads each clone's task files: task key -> status, per
// clone.
func fileStatuses(t *testing.T, roots []string) []map[string]string {
	t.Helper()
	out := make([]map[string]string, len(roots))
	for i, root := range roots {
		out[i] = map[string]string{}
		for _, f := range readTaskFiles(t, root) {
			if f.task == nil {
				t.Errorf("clone %d: %s: %v", i+1, f.path, f.err)
				continue
			}
			out[i][f.task.Key] = string(f.task.Status)
		}
	}
	return out
}

// checkDrained checks the end of a drain of n tasks (SNAG-1 to SNAG-n):
// every task resolved in exactly one clone's files, by an agent of that
// clone whose resolve was acknowledged, and done in the shared state; no
// (task, epoch) granted twice.
func checkDrained(t *testing.T, r *drainRace, roots []string, pool *pgxpool.Pool, n int) {
	t.Helper()
	if twice := r.epochsTwice(); len(twice) > 0 {
		t.Errorf("%d leases granted twice at one epoch: %v", len(twice), first(twice))
	}
	cloneOf := map[int]int{-1: -1}
	for _, a := range r.agents {
		cloneOf[a.id] = a.clone
	}
	for _, c := range r.claims {
		if c.agent < 0 {
			cloneOf[c.agent] = c.clone
		}
	}
	files := fileStatuses(t, roots)
	shared, err := sharedLeases(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for i := 1; i <= n; i++ {
		key := queue.Alias(i)
		var in []int
		for c := range files {
			if files[c][key] == string(queue.StatusResolved) {
				in = append(in, c)
			}
		}
		by := r.resolved[key]
		switch {
		case len(in) != 1:
			bad = append(bad, fmt.Sprintf("%s resolved in the files of %d clones (%v)", key, len(in), in))
		case len(by) != 1:
			bad = append(bad, fmt.Sprintf("%s: %d acknowledged resolves (agents %v)", key, len(by), by))
		case cloneOf[by[0]] != in[0]:
			bad = append(bad, fmt.Sprintf("%s resolved in clone %d's files, but agent %d of clone %d resolved it", key, in[0]+1, by[0], cloneOf[by[0]]+1))
		}
		if l := shared[key]; l.state != coord.Done {
			bad = append(bad, fmt.Sprintf("%s is %q in the shared state (epoch %d), want done", key, l.state, l.epoch))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d tasks not drained as they should be: %v", len(bad), first(bad))
	}
	if len(shared) != n {
		t.Errorf("%d leases in the shared state, want %d", len(shared), n)
	}
}

// noPassword fails the test when a log holds the database's password.
func noPassword(t *testing.T, logs ...string) {
	t.Helper()
	pw := pgtest.Shared(t).Password
	for _, l := range logs {
		if strings.Contains(l, pw) {
			t.Fatal("a log holds the coordination store's password")
		}
	}
}

// TestTeamDrainThreeClonesMCP is issue 17's test (TESTPLAN T2, small):
// three clones of one bare repository (real git clone), three snagd on one
// PostgreSQL, and real snag mcp agents, as many on each clone, drain the
// queue with snag_claim (no id) and snag_resolve. Every task is claimed
// exactly once, each (task, epoch) is granted once, and at the end the
// files and the shared state agree: each task is resolved in exactly one
// clone's files, by the agent of that clone whose resolve was
// acknowledged, and the shared state says every task is done. It runs the
// issue's full size, 3,000 tasks and 30 agents, ten on each clone, against
// snagd built with the race detector (-short: 300 and 9);
// BenchmarkTeamClaims times the same drain with snagd built for speed.
func TestTeamDrainThreeClonesMCP(t *testing.T) {
	t.Parallel()
	n, agents := drainSize()
	bare := teamRepo(t, n, teamNoVerify)
	dsn := teamDB(t)
	pool := drainPool(t, dsn)
	var ds []*daemon
	var roots, homes []string
	for range 3 {
		d := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
		ds, roots, homes = append(ds, d), append(roots, d.root), append(homes, d.home)
	}
	waitPublished(t, pool, 3, n)
	ctx := context.Background()
	r := &drainRace{agents: drainAgents(t, snagdBin, roots, homes, agents)}
	r.epoch = func(clone int, key string) (int64, error) {
		l, err := sharedLeaseOf(ctx, pool, key)
		if err == nil && (l.state != coord.Held || l.root != roots[clone]) {
			err = fmt.Errorf("the shared state has it %s by the clone in %s at epoch %d, want held by the clone in %s", l.state, l.root, l.epoch, roots[clone])
		}
		return l.epoch, err
	}
	r.left = func() (int, int, error) { return leftIn(ctx, pool, n) }
	r.emptyWait = 20 * time.Millisecond
	r.run()
	t.Logf("%d agents on 3 clones drained %d tasks in %v: claim p50 %.1f ms, p99 %.1f ms",
		agents, n, r.wall.Round(time.Millisecond), percentile(r.claimLat, 0.50), percentile(r.claimLat, 0.99))
	if r.falseEmpty > 0 {
		t.Logf("%d claims answered nothing is ready while tasks were open (TestTeamDrainNothingReadyWhileTasksAreLeft); the agents asked again", r.falseEmpty)
	}
	if len(r.errs) > 0 || len(r.refused) > 0 || r.retried > 0 {
		t.Errorf("%d tool errors, %d resolves refused, %d answers saying to call again: %v %v", len(r.errs), len(r.refused), r.retried, first(r.errs), first(r.refused))
	}
	per := map[string]int{}
	for _, c := range r.claims {
		per[c.key]++
	}
	var twice []string
	for k, times := range per {
		if times != 1 {
			twice = append(twice, fmt.Sprintf("%s claimed %d times", k, times))
		}
	}
	if len(per) != n || len(twice) > 0 {
		t.Errorf("%d tasks claimed, want %d; %d claimed more than once: %v", len(per), n, len(twice), first(twice))
	}
	checkDrained(t, r, roots, pool, n)
	var logs []string
	for i, d := range ds {
		logs = append(logs, d.log.String())
		if got := strings.Count(d.log.String(), "gave up waiting for snag.db"); got > 0 {
			t.Logf("clone %d: snagd retried %d busy answers", i+1, got)
		}
	}
	for _, a := range r.agents {
		logs = append(logs, a.br.log.String())
	}
	noPassword(t, logs...)
}

// TestTeamDrainKilledCloneMCP (TESTPLAN T3): the drain of
// TestTeamDrainThreeClonesMCP, smaller (300 tasks, 9 agents; -short: 150,
// 6), with clone 1's snagd killed (SIGKILL) once about a third is
// drained.
//
// When a third is drained the agents are held between a claim and its
// resolve, so that every agent holds a lease when snagd dies, and none is
// in the middle of a write (a resolve killed between its commit and the
// store hearing of it is TestTeamDrainResolveKilledBeforeTheStoreHeard's).
// After the grace (3 s) the killed clone's leases are free in the shared
// state at their epochs, and nobody else's lease is touched: the other
// agents keep holding theirs across the sweep. The test's own agent on
// clone 2 takes one of the freed tasks (the next epoch) and resolves it.
// The killed snagd is started again (same root and SNAG_HOME), and its
// bridges find it again: it takes back the leases no one took, at their
// epochs, and releases the one clone 2 resolved. Then the agents go on:
// the resolves of the taken-back leases succeed, that of the task clone 2
// took is refused, and the drain completes.
//
// "Exactly once" here: no two agents ever hold a task's lease at once,
// which the test checks by reading, for every claim granted, the task's
// epoch in the shared state while the agent holds it: each (task, epoch)
// is granted once; a lease taken back after the restart keeps its
// epoch and is the same agent's. And every task is resolved exactly once:
// in one clone's files, with one acknowledged resolve, done in the shared
// state. The task clone 2 took is claimed twice (at two epochs) and
// resolved once, by clone 2.
func TestTeamDrainKilledCloneMCP(t *testing.T) {
	t.Parallel()
	n, agents := 300, 9
	if testing.Short() {
		n, agents = 150, 6
	}
	ctx := context.Background()
	bare := teamRepo(t, n, teamNoVerify)
	dsn := teamDB(t)
	pool := drainPool(t, dsn)
	grace := 3 * time.Second
	var ds []*daemon
	var roots, homes []string
	for range 3 {
		d := startTeamHome(t, teamClone(t, bare), filepath.Join(t.TempDir(), "home"), dsn, grace)
		ds, roots, homes = append(ds, d), append(roots, d.root), append(homes, d.home)
	}
	waitPublished(t, pool, 3, n)
	r := &drainRace{agents: drainAgents(t, snagdBin, roots, homes, agents), gate: newDrainGate()}
	r.epoch = func(clone int, key string) (int64, error) {
		l, err := sharedLeaseOf(ctx, pool, key)
		if err == nil && (l.state != coord.Held || l.root != roots[clone]) {
			err = fmt.Errorf("the shared state has it %s by the clone in %s at epoch %d, want held by the clone in %s", l.state, l.root, l.epoch, roots[clone])
		}
		return l.epoch, err
	}
	r.left = func() (int, int, error) { return leftIn(ctx, pool, n) }
	r.emptyWait = 20 * time.Millisecond
	drained := make(chan struct{})
	go func() { defer close(drained); r.run() }()
	t.Cleanup(func() { r.gate.set(false) }) // a test that fails early lets the agents go

	eventually(t, "a third of the tasks to be drained", func() bool {
		_, undone, err := leftIn(ctx, pool, n)
		return err == nil && undone <= n-n/3
	})
	r.gate.set(true)
	eventually(t, "every agent to hold a lease", func() bool { return r.gate.waiting() == agents })
	before, err := sharedLeases(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	held := map[int][]string{} // clone -> the tasks its agents hold
	for key, l := range before {
		if l.state == coord.Held {
			c := slices.Index(roots, l.root)
			if c < 0 {
				t.Fatalf("%s is held by a clone in %s, none of the three", key, l.root)
			}
			held[c] = append(held[c], key)
		}
	}
	for c := range 3 {
		if want := agents / 3; len(held[c]) != want {
			t.Fatalf("clone %d's agents hold %d tasks at the kill (%v), want %d, one each", c+1, len(held[c]), held[c], want)
		}
	}
	slices.SortFunc(held[0], func(a, b string) int { return queueNumber(a) - queueNumber(b) })

	ds[0].cmd.Process.Kill()
	<-ds[0].done
	killed := time.Now()
	eventually(t, "the killed clone's leases to be freed", func() bool {
		l, err := sharedLeaseOf(ctx, pool, held[0][0])
		return err == nil && l.state == coord.Free
	})
	t.Logf("clone 1's leases freed %v after its snagd was killed (grace %v)", time.Since(killed).Round(100*time.Millisecond), grace)
	var silent float64
	if err := pool.QueryRow(ctx, `SELECT extract(epoch FROM ended - seen)::float8 FROM clones WHERE root = $1 AND ended IS NOT NULL`, roots[0]).Scan(&silent); err != nil {
		t.Fatal(err)
	}
	if silent < grace.Seconds() {
		t.Errorf("the killed clone was ended %.1f s after its last heartbeat, by the database's clock: before its grace of %v", silent, grace)
	}
	after, err := sharedLeases(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for c, keys := range held {
		for _, key := range keys {
			b, a := before[key], after[key]
			switch {
			case c == 0 && (a.state != coord.Free || a.epoch != b.epoch):
				t.Errorf("%s, held by the killed clone at epoch %d: %s at epoch %d after the grace, want free at the same epoch", key, b.epoch, a.state, a.epoch)
			case c != 0 && a != b:
				t.Errorf("%s, held by clone %d: %+v after the killed clone's sweep, was %+v: another clone's lease was touched", key, c+1, a, b)
			}
		}
	}
	var swept []string
	rows, err := pool.Query(ctx, `SELECT l.key FROM audit a JOIN leases l ON l.task_id = a.task_id
		WHERE a.action = 'release' AND a.detail LIKE '%clone gone%' ORDER BY l.key`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key string
		rows.Scan(&key)
		swept = append(swept, key)
	}
	rows.Close()
	slices.SortFunc(swept, func(a, b string) int { return queueNumber(a) - queueNumber(b) })
	if !slices.Equal(swept, held[0]) {
		t.Errorf("the shared audit log says the sweep released %v, want the killed clone's %v", swept, held[0])
	}

	// Clone 2 takes one of the freed tasks.
	taken := held[0][0]
	obs := newTeamAgent(t, ds[1])
	c, code, body := obs.claim(taken)
	if code != http.StatusOK || c.Epoch != before[taken].epoch+1 {
		t.Fatalf("clone 2 claims %s, freed at epoch %d: %d %s, want it granted at the next epoch", taken, before[taken].epoch, code, body)
	}
	r.mu.Lock()
	r.claims = append(r.claims, drainClaim{key: taken, agent: -1, clone: 1, epoch: c.Epoch})
	r.mu.Unlock()
	if code, body, _ := obs.call(http.MethodPost, "/tasks/"+taken+"/resolve", map[string]any{"epoch": c.Epoch}); code != http.StatusOK {
		t.Fatalf("clone 2 resolves %s: %d %s", taken, code, body)
	}
	r.mu.Lock()
	r.ackedLocked(taken, -1)
	r.mu.Unlock()

	killedLog := ds[0].log.String()
	ds[0] = startTeamHome(t, roots[0], homes[0], dsn, grace)
	eventually(t, "the restarted clone to take its surviving leases back at their epochs", func() bool {
		for _, key := range held[0][1:] {
			l, err := sharedLeaseOf(ctx, pool, key)
			if err != nil || l.state != coord.Held || l.root != roots[0] || l.epoch != before[key].epoch {
				return false
			}
		}
		return teamStatus(ds[0], taken) == string(queue.StatusOpen)
	})
	r.gate.set(false)
	<-drained

	t.Logf("%d agents drained %d tasks across the kill in %v; %d answers said to call again, %d claims answered nothing is ready while tasks were open",
		agents, n, r.wall.Round(time.Millisecond), r.retried, r.falseEmpty)
	if len(r.errs) > 0 {
		t.Errorf("%d tool errors: %v", len(r.errs), first(r.errs))
	}
	if len(r.refused) != 1 || !strings.HasPrefix(r.refused[0], taken+" ") {
		t.Errorf("resolves refused: %v, want one: %s's, which clone 2 took", r.refused, taken)
	}
	per := map[string]int{}
	for _, c := range r.claims {
		per[c.key]++
	}
	for key, times := range per {
		if times != 1 && !(key == taken && times == 2) {
			t.Errorf("%s claimed %d times", key, times)
		}
	}
	if len(per) != n {
		t.Errorf("%d tasks claimed, want %d", len(per), n)
	}
	checkDrained(t, r, roots, pool, n)
	logs := []string{killedLog}
	for _, d := range ds {
		logs = append(logs, d.log.String())
	}
	for _, a := range r.agents {
		logs = append(logs, a.br.log.String())
	}
	noPassword(t, logs...)
}

// queueNumber is the number of an alias: 12 for SNAG-12.
func queueNumber(key string) int {
	n, _ := strconv.Atoi(key[strings.LastIndexByte(key, '-')+1:])
	return n
}

// TestT3_ResolveOnceAcrossAKill: snagd dies in the middle of an agent's
// resolve, with its agent never answered. The store is told a finish
// before the file is written (engine teamEndFirst), so:
//
//   - killed right after the commit (resolve:committed): the file says
//     resolved and the store says done, at once. No other clone is granted
//     the task while the clone is down, within its grace or after the
//     others swept it (the window in which another clone used to be granted
//     the finished task and do it again), nor after it is back.
//   - killed after the store heard and before the file was written
//     (resolve:temp-created): the file still says claimed. The task is done
//     in the store, so no clone is granted it meanwhile; the restarted
//     clone takes its lease back at its epoch (a lease done at its own
//     epoch is an end this clone told first), and the agent's resolve,
//     tried again, succeeds.
func TestT3_ResolveOnceAcrossAKill(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		point    string
		swept    bool // clone 1 comes back after the others swept it
		resolved bool // the file says resolved after the kill
	}{
		{"committed, back within the grace", "resolve:committed", false, true},
		{"committed, back after the sweep", "resolve:committed", true, true},
		{"before the file, back within the grace", "resolve:temp-created", false, false},
		{"before the file, back after the sweep", "resolve:temp-created", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bare := teamRepo(t, 3, teamNoVerify)
			dsn := teamDB(t)
			pool := drainPool(t, dsn)
			grace := 3 * time.Second
			root1, home1 := teamClone(t, bare), filepath.Join(t.TempDir(), "home")
			d1 := spawnEnv(t, root1, home1, []string{coord.Env + "=" + dsn, daemonpkg.FailpointEnv + "=" + c.point},
				"--log", "debug", "--coord-grace", grace.String())
			d1.waitReady()
			d2 := startTeam(t, teamClone(t, bare), dsn, grace)
			a, b := newTeamAgent(t, d1), newTeamAgent(t, d2)
			a.keepAlive(t)
			c1, code, body := a.claim("SNAG-1")
			if code != http.StatusOK {
				t.Fatalf("claim SNAG-1 on clone 1: %d %s", code, body)
			}
			a.call(http.MethodPost, "/tasks/SNAG-1/resolve", map[string]any{"epoch": c1.Epoch})
			crKilled(t, d1, c.point)
			status := ""
			for _, f := range readTaskFiles(t, root1) {
				if f.task != nil && f.task.Key == "SNAG-1" {
					status = string(f.task.Status)
				}
			}
			if want := map[bool]string{true: "resolved", false: "claimed"}[c.resolved]; status != want {
				t.Fatalf("SNAG-1 is %q in clone 1's file after the kill at %s, want %s", status, c.point, want)
			}
			refusedElsewhere := func(when string) {
				t.Helper()
				if l, err := sharedLeaseOf(context.Background(), pool, "SNAG-1"); err != nil || l.state != coord.Done {
					t.Fatalf("%s: SNAG-1 is %s in the shared state (%v), want done", when, l.state, err)
				}
				if _, code, body := b.claim("SNAG-1"); code == http.StatusOK {
					t.Fatalf("%s: clone 2 was granted SNAG-1, which clone 1's agent was resolving: %s", when, body)
				}
			}
			refusedElsewhere("right after the kill")
			if c.swept {
				eventually(t, "the other clone to sweep clone 1 after its grace", func() bool {
					var ended int
					pool.QueryRow(context.Background(), `SELECT count(*) FROM clones WHERE root = $1 AND ended IS NOT NULL`, root1).Scan(&ended)
					return ended == 1
				})
				refusedElsewhere("after the sweep")
			}
			d1 = startTeamHome(t, root1, home1, dsn, grace)
			a.to(d1)
			if c.resolved {
				refusedElsewhere("after the restart")
				return
			}
			eventually(t, "the restarted clone to take SNAG-1's lease back at its epoch", func() bool {
				l, err := sharedLeaseOf(context.Background(), pool, "SNAG-1")
				return err == nil && l.state == coord.Held && l.epoch == c1.Epoch && l.root == root1
			})
			if code, body, _ := a.call(http.MethodPost, "/tasks/SNAG-1/resolve", map[string]any{"epoch": c1.Epoch}); code != http.StatusOK {
				t.Fatalf("the agent's resolve, tried again after the restart: %d %s", code, body)
			}
			refusedElsewhere("after the resolve tried again")
		})
	}
}

// TestTeamDrainNothingReadyWhileTasksAreLeft: agents on two clones claim
// the next task and resolve it, each stopping at the first claim that
// answers nothing is ready, as an agent does. Claim-next must not say so
// while tasks are left that no one holds: the queue must be drained.
//
// It guards against a grant that locks more than the task it takes: with
// the advisory lock in the WHERE clause of one query, PostgreSQL took it
// on every ready row of the clone before the sort and the limit, and
// while one grant's transaction was open every other grant found every
// task locked and answered "nothing is ready". GrantNext now reads its
// candidates without a lock and tries them one at a time.
func TestTeamDrainNothingReadyWhileTasksAreLeft(t *testing.T) {
	t.Parallel()
	n := 150
	bare := teamRepo(t, n, teamNoVerify)
	dsn := teamDB(t)
	pool := drainPool(t, dsn)
	d1 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	d2 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	waitPublished(t, pool, 2, n)
	var mu sync.Mutex
	var early []string
	var wg sync.WaitGroup
	for i := range 6 {
		a := newTeamAgent(t, []*daemon{d1, d2}[i%2])
		wg.Go(func() {
			for {
				c, code, _ := a.claimNext(t)
				if code != http.StatusOK {
					return
				}
				if c.Task == nil {
					if open, _, err := leftIn(context.Background(), pool, n); err == nil && open > 0 {
						mu.Lock()
						early = append(early, fmt.Sprintf("%s was told %q with %d tasks open", a.name, c.Reason, open))
						mu.Unlock()
					}
					return
				}
				if code, body, _ := a.call(http.MethodPost, "/tasks/"+c.Task.Key+"/resolve", map[string]any{"epoch": c.Epoch}); code != http.StatusOK {
					t.Errorf("resolve %s: %d %s", c.Task.Key, code, body)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(early) > 0 {
		t.Errorf("%d agents stopped while tasks were open: %v", len(early), early)
	}
	if _, undone, err := leftIn(context.Background(), pool, n); err != nil || undone != 0 {
		t.Fatalf("%d of %d tasks not done when every agent had been told nothing is ready (%v)", undone, n, err)
	}
}

// The benchmarks' helpers: teamRepo, teamClone, teamDB and startTeam take
// a *testing.T, and run the race-built snagd.

// gitTB is git for a benchmark, run as git runs in the tests.
func gitTB(tb testing.TB, dir string, args ...string) {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Dana", "-c", "user.email=dana@example.com",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// benchRepo is teamRepo for a benchmark: a bare repository whose main
// branch holds a project that resolves without verify, with n open tasks,
// SNAG-1 to SNAG-n.
func benchRepo(tb testing.TB, n int) string {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		tb.Skipf("git is needed: %v", err)
	}
	base := tb.TempDir()
	seed := filepath.Join(base, "seed")
	tasks := filepath.Join(seed, ".snag", "tasks")
	if err := os.MkdirAll(tasks, 0o755); err != nil {
		tb.Fatal(err)
	}
	os.WriteFile(filepath.Join(seed, ".snag", "config.json"), []byte(teamNoVerify), 0o644)
	os.WriteFile(filepath.Join(seed, ".snag", ".gitignore"), []byte(gitignore), 0o644)
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		tk := &queue.Task{ID: fmt.Sprintf("tsk_01JTEAM%019d", i), Key: queue.Alias(i), Title: fmt.Sprintf("Team task %d", i),
			Status: queue.StatusOpen, Kind: queue.KindBug, Severity: queue.SeverityMedium, Wave: 1, Trust: queue.TrustVetted,
			Created: created.Add(time.Duration(i) * time.Second), Body: []byte("Fix it.\n")}
		if err := os.WriteFile(filepath.Join(tasks, queue.FileName(tk.Key, tk.Title)), codec.Format(tk), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	gitTB(tb, seed, "init", "-q")
	gitTB(tb, seed, "add", "-A")
	gitTB(tb, seed, "commit", "-qm", "tasks")
	bare := filepath.Join(base, "origin.git")
	gitTB(tb, base, "clone", "-q", "--bare", seed, bare)
	return bare
}

// benchClone is teamClone for a benchmark.
func benchClone(tb testing.TB, bare string) string {
	tb.Helper()
	root := filepath.Join(tb.TempDir(), "clone")
	gitTB(tb, filepath.Dir(root), "clone", "-q", bare, root)
	return root
}

// benchDB is teamDB for a benchmark.
func benchDB(tb testing.TB) string {
	tb.Helper()
	dsn := pgtest.NewDB(tb)
	if _, err := coord.Init(context.Background(), dsn); err != nil {
		tb.Fatal(err)
	}
	return dsn
}

// teamNode is a snagd under measurement: bin on root, in team mode on dsn
// (alone when dsn is ""), with its own SNAG_HOME.
type teamNode struct {
	root, home string
	p          *snagdtest.Process
	client     *http.Client
}

func startTeamNode(tb testing.TB, bin, root, dsn string) *teamNode {
	tb.Helper()
	nd := &teamNode{root: root, home: filepath.Join(tb.TempDir(), "home"), client: newClient()}
	var env []string
	if dsn != "" {
		env = []string{coord.Env + "=" + dsn}
	}
	nd.p = snagdtest.Start(tb, snagdtest.Options{Bin: bin, Root: root, Home: nd.home, Port: snagdtest.FreePort(tb),
		Args: []string{"--log", "info"}, Env: env, StopWait: 30 * time.Second})
	nd.p.WaitReady(tb, 2*time.Minute)
	return nd
}

// call sends an authorized request, for session when it is not 0, and
// returns the status and body.
func (nd *teamNode) call(method, path string, session int64, in any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		raw, _ := json.Marshal(in)
		body = strings.NewReader(string(raw))
	}
	req, err := http.NewRequest(method, nd.p.URL(path), body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+nd.p.Token)
	req.Header.Set("Content-Type", "application/json")
	if session != 0 {
		req.Header.Set(daemonpkg.SessionHeader, strconv.FormatInt(session, 10))
	}
	resp, err := nd.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// register opens an agent's session over HTTP and holds its stream, as a
// bridge does, until ctx ends; it returns the session's id and name.
func (nd *teamNode) register(ctx context.Context, tb testing.TB) (int64, string) {
	tb.Helper()
	code, body, err := nd.call(http.MethodPost, "/sessions", 0, map[string]any{"client": "team-bench", "client_version": "1",
		"pid": os.Getpid(), "transport": "http"})
	if err != nil || code != http.StatusCreated {
		tb.Fatalf("register: %d %s %v", code, body, err)
	}
	var s struct {
		ID   int64
		Name string
	}
	json.Unmarshal(body, &s)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, nd.p.URL("/sessions/"+strconv.FormatInt(s.ID, 10)+"/stream"), nil)
	req.Header.Set("Authorization", "Bearer "+nd.p.Token)
	resp, err := newClient().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("hold the stream of session %d: %v", s.ID, err)
	}
	go func() { io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
	return s.ID, s.Name
}

// events follows the node's /events and sends each data line on the
// channel until ctx ends.
func (nd *teamNode) events(ctx context.Context, tb testing.TB) <-chan string {
	tb.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, nd.p.URL("/events"), nil)
	req.Header.Set("Authorization", "Bearer "+nd.p.Token)
	resp, err := newClient().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				lines <- data
			}
		}
	}()
	return lines
}

// BenchmarkTeamClaims is issue 17's benchmark (TESTPLAN T2, full size):
// 30 real snag mcp agents drain 3,000 tasks (-short: 9 and 300) with
// snag_claim (no id) and, at once, snag_resolve; the project resolves
// without verify. "team" runs three clones of one bare repository, each
// with its snagd, on one PostgreSQL, ten agents on each; "alone" one
// snagd with no coordination store (embedded mode) and all 30 agents on
// it. One iteration is one whole drain on fresh clones, database and
// snagd (their start is not timed). It reports claim+resolve pairs per
// second over the drain ("claims/s"), the claim's round trip through the
// bridge (p50-ms, p99-ms) and the resolve's, and the errors agents saw; it
// fails on a task claimed twice or never.
func BenchmarkTeamClaims(b *testing.B) {
	n, agents := 3000, 30
	if testing.Short() {
		n, agents = 300, 9
	}
	bin := benchSnagd(b)
	for _, mode := range []struct {
		name   string
		clones int
		team   bool
	}{{"team", 3, true}, {"alone", 1, false}} {
		b.Run(mode.name, func(b *testing.B) {
			var (
				claims, resolves []time.Duration
				wall             time.Duration
				done, errs       int
				falseEmpty       int
				cpu              cpuUse
			)
			for b.Loop() {
				b.StopTimer()
				bare := benchRepo(b, n)
				dsn := ""
				if mode.team {
					dsn = benchDB(b)
				}
				var nodes []*teamNode
				var roots, homes []string
				for range mode.clones {
					nd := startTeamNode(b, bin, benchClone(b, bare), dsn)
					nodes, roots, homes = append(nodes, nd), append(roots, nd.root), append(homes, nd.home)
				}
				var pool *pgxpool.Pool
				if mode.team {
					pool = drainPool(b, dsn)
					waitPublished(b, pool, mode.clones, n)
				} else {
					deadline := time.Now().Add(time.Minute)
					for nodes[0].p.Health().Counts.Tasks != n {
						if time.Now().After(deadline) {
							b.Fatalf("snagd has not indexed %d tasks after a minute", n)
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
				r := &drainRace{agents: drainAgents(b, bin, roots, homes, agents)}
				if mode.team {
					// A claim-next in team mode may answer nothing is
					// ready while tasks are left (see
					// TestTeamDrainNothingReadyWhileTasksAreLeft): the
					// agents ask again 10 ms later, and the answers are
					// counted (false-empty).
					r.left = func() (int, int, error) { return leftIn(context.Background(), pool, n) }
					r.emptyWait = 10 * time.Millisecond
				}
				cpu0 := benchCPU(bin)
				b.StartTimer()
				r.run()
				b.StopTimer()
				cpu = cpu.add(benchCPU(bin).sub(cpu0))
				per := map[string]int{}
				for _, c := range r.claims {
					per[c.key]++
				}
				var twice int
				for _, times := range per {
					if times > 1 {
						twice++
					}
				}
				if len(per) != n || twice > 0 || len(r.resolveLat) != n {
					b.Errorf("%d tasks claimed, %d more than once, %d resolved; want %d, once each", len(per), twice, len(r.resolveLat), n)
				}
				b.Logf("%s: claims/s in each third of the drain: %.0f", mode.name, r.rates())
				for _, e := range first(append(r.errs, r.refused...)) {
					b.Log(e)
				}
				claims, resolves = append(claims, r.claimLat...), append(resolves, r.resolveLat...)
				falseEmpty += r.falseEmpty
				wall += r.wall
				done += len(r.resolveLat)
				errs += len(r.errs) + len(r.refused) + r.retried
				var wg sync.WaitGroup
				for _, a := range r.agents {
					wg.Go(a.br.close)
				}
				wg.Wait()
				for _, nd := range nodes {
					nd.p.Stop()
				}
				b.StartTimer()
			}
			logLoad(b)
			b.Logf("%s: %d agents on %d snagd, %d tasks per drain", mode.name, agents, mode.clones, n)
			b.ReportMetric(float64(done)/wall.Seconds(), "claims/s")
			b.ReportMetric(percentile(claims, 0.50), "p50-ms")
			b.ReportMetric(percentile(claims, 0.99), "p99-ms")
			b.ReportMetric(percentile(resolves, 0.50), "resolve-p50-ms")
			b.ReportMetric(percentile(resolves, 0.99), "resolve-p99-ms")
			b.ReportMetric(float64(errs), "errors")
			b.ReportMetric(cpu.snagd.Seconds()*1000/float64(done), "snagd-cpu-ms/claim")
			b.ReportMetric(cpu.pg.Seconds()*1000/float64(done), "pg-cpu-ms/claim")
			b.ReportMetric(cpu.bridges.Seconds()*1000/float64(done), "bridge-cpu-ms/claim")
			if mode.team {
				b.ReportMetric(float64(falseEmpty), "false-empty")
			}
		})
	}
}

// cpuUse is the processor time, user and system, that the processes of
// a drain used: the snagd, PostgreSQL's (all of them, the cluster's own
// and its backends) and the agents' snag mcp bridges. Per claim it says
// what a clone costs whatever the machine, which the throughput of three
// snagd sharing one machine's two cores with their database does not.
type cpuUse struct{ snagd, pg, bridges time.Duration }

func (c cpuUse) add(o cpuUse) cpuUse {
	return cpuUse{c.snagd + o.snagd, c.pg + o.pg, c.bridges + o.bridges}
}

func (c cpuUse) sub(o cpuUse) cpuUse {
	return cpuUse{c.snagd - o.snagd, c.pg - o.pg, c.bridges - o.bridges}
}

// benchCPU reads, from /proc, the processor time so far of the live
// processes running bin (snagd, and as "snag mcp" the bridges) and of
// PostgreSQL's. A process that ended since an earlier reading is not
// counted in either, so a drain's figure is read while all of them live.
func benchCPU(bin string) cpuUse {
	var c cpuUse
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		var into *time.Duration
		switch {
		case args[0] == bin && len(args) > 2 && args[1] == "snag" && args[2] == "mcp":
			into = &c.bridges
		case args[0] == bin:
			into = &c.snagd
		case strings.HasPrefix(filepath.Base(args[0]), "postgres"):
			into = &c.pg
		default:
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command's name, in parentheses: utime and
		// stime are the 14th and 15th of the line, in clock ticks (100 a
		// second on Linux).
		_, rest, ok := strings.Cut(string(stat), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		*into += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return c
}

// logLoad records the machine's load with the figures.
func logLoad(tb testing.TB) {
	tb.Helper()
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		tb.Logf("load average: %s", strings.TrimSpace(string(raw)))
	}
}

// BenchmarkTeamEventLatency measures how long a claim on clone A takes to
// appear on clone B's /events, labelled "source":"team": from the claim's
// request to the event's line, over 200 claims (-short: 50), one at a
// time, each resolved before the next (not timed). B's listener needs a
// moment after its start: the measure begins once B's /events has shown a
// session registered on A.
func BenchmarkTeamEventLatency(b *testing.B) {
	claims := 200
	if testing.Short() {
		claims = 50
	}
	bin := benchSnagd(b)
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		bare := benchRepo(b, claims)
		dsn := benchDB(b)
		na, nb := startTeamNode(b, bin, benchClone(b, bare), dsn), startTeamNode(b, bin, benchClone(b, bare), dsn)
		ctx, cancel := context.WithCancel(context.Background())
		lines := nb.events(ctx, b)
		var session int64
		heard := false
		for try := 0; try < 50 && !heard; try++ {
			id, name := na.register(ctx, b)
			timeout := time.After(200 * time.Millisecond)
		registered:
			for {
				select {
				case l := <-lines:
					if strings.Contains(l, `"name":"`+name+`"`) && strings.Contains(l, `"source":"team"`) {
						session, heard = id, true
						break registered
					}
				case <-timeout:
					break registered
				}
			}
		}
		if !heard {
			b.Fatal("clone B's /events never showed a session registered on clone A")
		}
		b.StartTimer()
		for i := 1; i <= claims; i++ {
			key := queue.Alias(i)
			start := time.Now()
			code, body, err := na.call(http.MethodPost, "/tasks/"+key+"/claim", session, map[string]any{})
			if err != nil || code != http.StatusOK {
				b.Fatalf("claim %s: %d %s %v", key, code, body, err)
			}
			deadline := time.After(10 * time.Second)
		wait:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						b.Fatal("clone B's /events ended")
					}
					if strings.Contains(l, `"`+key+`"`) && strings.Contains(l, `"source":"team"`) {
						lat = append(lat, time.Since(start))
						break wait
					}
				case <-deadline:
					b.Fatalf("clone B's /events did not show the claim of %s on clone A within 10 s", key)
				}
			}
			b.StopTimer()
			var c teamClaim
			json.Unmarshal(body, &c)
			if code, body, err := na.call(http.MethodPost, "/tasks/"+key+"/resolve", session, map[string]any{"epoch": c.Epoch}); err != nil || code != http.StatusOK {
				b.Fatalf("resolve %s: %d %s %v", key, code, body, err)
			}
			b.StartTimer()
		}
		b.StopTimer()
		cancel()
		na.p.Stop()
		nb.p.Stop()
		b.StartTimer()
	}
	logLoad(b)
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
	b.ReportMetric(float64(len(lat))/float64(b.N), "claims/op")
}

// pgLoad is what the coordination store's database has done so far, from
// PostgreSQL's statistics (pg_stat_statements is not loaded in the test
// cluster): transactions committed and rolled back, and rows updated in
// clones (a heartbeat updates its clone's row).
type pgLoad struct {
	xacts, beats int64
	tables       map[string]int64 // rows written (inserted, updated, deleted) and scans, by table
	at           time.Time
}

func readLoad(tb testing.TB, pool *pgxpool.Pool) pgLoad {
	tb.Helper()
	ctx := context.Background()
	l := pgLoad{at: time.Now(), tables: map[string]int64{}}
	err := pool.QueryRow(ctx, `SELECT
		(SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()),
		(SELECT coalesce(sum(n_tup_upd), 0)::bigint FROM pg_stat_user_tables WHERE relname = 'clones')`).Scan(&l.xacts, &l.beats)
	if err != nil {
		tb.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT relname, n_tup_ins + n_tup_upd + n_tup_del, coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var written, scans int64
		if err := rows.Scan(&name, &written, &scans); err != nil {
			tb.Fatal(err)
		}
		l.tables[name+" written"], l.tables[name+" scans"] = written, scans
	}
	return l
}

// since is what changed in the tables from before to l, busiest first.
func (l pgLoad) since(before pgLoad) string {
	var out []string
	for k, v := range l.tables {
		if d := v - before.tables[k]; d > 0 {
			out = append(out, fmt.Sprintf("%s %d", k, d))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// BenchmarkTeamHeartbeatLoad measures the load idle agents put on
// PostgreSQL in team mode: three snagd on one database, with 0, 100 and
// 300 agents (HTTP sessions, their streams held, as bridges hold them)
// registered and idle for 20 s (-short: 5 s). It reports the database's
// transactions per second (pg_stat_database, which PostgreSQL's backends
// update about once a second, so a window's count is good to a few
// transactions) and the clones rows updated per second (heartbeats); the
// heartbeat is one UPDATE per clone every 2 s, whatever the agents, so the
// figures should not grow with them.
func BenchmarkTeamHeartbeatLoad(b *testing.B) {
	window := 20 * time.Second
	if testing.Short() {
		window = 5 * time.Second
	}
	bin := benchSnagd(b)
	for _, agents := range []int{0, 100, 300} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			var xacts, beats float64
			var secs float64
			for b.Loop() {
				b.StopTimer()
				bare := benchRepo(b, 10)
				dsn := benchDB(b)
				pool := drainPool(b, dsn)
				var nodes []*teamNode
				for range 3 {
					nodes = append(nodes, startTeamNode(b, bin, benchClone(b, bare), dsn))
				}
				ctx, cancel := context.WithCancel(context.Background())
				for i := range agents {
					nodes[i%3].register(ctx, b)
				}
				deadline := time.Now().Add(time.Minute)
				for {
					var live int
					pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE ended IS NULL`).Scan(&live)
					if live == agents {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("%d sessions in the store a minute after %d registered", live, agents)
					}
					time.Sleep(50 * time.Millisecond)
				}
				// A backend gone idle reports its statistics up to 10 s
				// later (PGSTAT_IDLE_INTERVAL): the registrations' must
				// not count in the window.
				time.Sleep(12 * time.Second)
				before := readLoad(b, pool)
				b.StartTimer()
				time.Sleep(window) // the benchmark measures the store's load over this window
				b.StopTimer()
				after := readLoad(b, pool)
				b.Logf("%d agents, %v: %s", agents, after.at.Sub(before.at).Round(time.Second), after.since(before))
				secs += after.at.Sub(before.at).Seconds()
				xacts += float64(after.xacts - before.xacts)
				beats += float64(after.beats - before.beats)
				cancel()
				for _, nd := range nodes {
					nd.p.Stop()
				}
				b.StartTimer()
			}
			b.ReportMetric(xacts/secs, "xact/s")
			b.ReportMetric(beats/secs, "heartbeats/s")
			if agents > 0 {
				b.ReportMetric(xacts/secs*100/float64(agents), "xact/s-per-100-agents")
			}
		})
	}
}
