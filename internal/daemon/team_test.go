package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/pgtest"
	"github.com/snagdev/snag/internal/queue"
)

// The config.json of the team tests' projects: resolve goes through a
// verify command that passes at once, or straight to resolved.
const (
	teamVerify   = `{"version": 1, "verify": {"command": "true", "timeout_seconds": 30}}` + "\n"
	teamNoVerify = `{"version": 1, "plan": {"verify_on_resolve": false}}` + "\n"
)

// teamRepo makes a bare repository whose main branch holds a snag project
// with config and n open tasks, SNAG-1 to SNAG-n, and returns its path.
func teamRepo(t *testing.T, n int, config string) string {
	t.Helper()
	needGit(t)
	base := t.TempDir()
	seed := filepath.Join(base, "seed")
	for _, d := range []string{"tasks", "notes", "plans", "shots"} {
		if err := os.MkdirAll(filepath.Join(seed, ".snag", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(seed, ".snag", "config.json"), []byte(config), 0o644)
	os.WriteFile(filepath.Join(seed, ".snag", ".gitignore"), []byte(gitignore), 0o644)
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		tk := &queue.Task{ID: fmt.Sprintf("tsk_01JTEAM%019d", i), Key: queue.Alias(i), Title: fmt.Sprintf("Team task %d", i),
			Status: queue.StatusOpen, Kind: queue.KindBug, Severity: queue.SeverityMedium, Wave: 1, Trust: queue.TrustVetted,
			Created: created.Add(time.Duration(i) * time.Second), Body: []byte("Fix it.\n")}
		name := queue.FileName(tk.Key, tk.Title)
		if err := os.WriteFile(filepath.Join(seed, ".snag", "tasks", name), codec.Format(tk), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, seed, "init", "-q")
	git(t, seed, "add", "-A")
	git(t, seed, "commit", "-qm", "tasks")
	bare := filepath.Join(base, "origin.git")
	git(t, base, "clone", "-q", "--bare", seed, bare)
	return bare
}

// teamClone clones bare into a new folder and returns its root.
func teamClone(t *testing.T, bare string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "clone")
	git(t, filepath.Dir(root), "clone", "-q", bare, root)
	return root
}

// teamDB is the DSN of a new database with the snag schema.
func teamDB(t *testing.T) string {
	t.Helper()
	dsn := pgtest.NewDB(t)
	if _, err := coord.Init(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// startTeam starts snagd on root in team mode, with the DSN in
// $SNAG_COORD (never on its command line) and the grace given.
func startTeam(t *testing.T, root, dsn string, grace time.Duration, extra ...string) *daemon {
	t.Helper()
	return startTeamHome(t, root, filepath.Join(t.TempDir(), "home"), dsn, grace, extra...)
}

// startTeamHome is startTeam with the daemon's SNAG_HOME given, for a
// restart that keeps its token.
func startTeamHome(t *testing.T, root, home, dsn string, grace time.Duration, extra ...string) *daemon {
	t.Helper()
	d := spawnEnv(t, root, home, []string{coord.Env + "=" + dsn},
		append([]string{"--log", "debug", "--coord-grace", grace.String()}, extra...)...)
	d.team = true // ready for a test once the start's reconcile has run: a write before it is 503 starting
	d.waitReady()
	return d
}

// teamAgent is an agent over snagd's HTTP API.
type teamAgent struct {
	mu      sync.Mutex
	d       *daemon // the snagd it talks to: a restart sets it (to)
	session int64
	name    string
}

// daemon is the snagd the agent talks to.
func (a *teamAgent) daemon() *daemon {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.d
}

// to points the agent at d, its snagd started again.
func (a *teamAgent) to(d *daemon) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.d = d
}

func newTeamAgent(t *testing.T, d *daemon) *teamAgent {
	t.Helper()
	var s struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	if code := d.do(http.MethodPost, "/sessions", map[string]any{"client": "team-test", "client_version": "1",
		"pid": os.Getpid(), "transport": "stdio", "root": d.root}, &s); code != http.StatusCreated {
		t.Fatalf("register: %d", code)
	}
	return &teamAgent{d: d, session: s.ID, name: s.Name}
}

// call sends a request as the agent and returns the status, the body and
// the Retry-After header.
func (a *teamAgent) call(method, path string, in any) (int, []byte, string) {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	d := a.daemon()
	req, _ := http.NewRequest(method, d.url(path), body)
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Snag-Session", strconv.FormatInt(a.session, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header.Get("Retry-After")
}

// header sends a request as the agent and returns the answer's header
// name.
func (a *teamAgent) header(method, path, name string) string {
	d := a.daemon()
	req, _ := http.NewRequest(method, d.url(path), nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("X-Snag-Session", strconv.FormatInt(a.session, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	resp.Body.Close()
	return resp.Header.Get(name)
}

type teamClaim struct {
	Task *struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	} `json:"task"`
	Epoch  int64  `json:"epoch"`
	Reason string `json:"reason"`
}

// keepAlive holds the session's stream open, as an MCP bridge does, until
// the test ends: after a restart of its snagd, it reconnects.
func (a *teamAgent) keepAlive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			d := a.daemon()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url("/sessions/"+strconv.FormatInt(a.session, 10)+"/stream"), nil)
			req.Header.Set("Authorization", "Bearer "+d.token)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			time.Sleep(50 * time.Millisecond) // a moment before it reconnects, as a bridge does
		}
	}()
}

// claim claims task key and returns the answer and its status.
func (a *teamAgent) claim(key string) (teamClaim, int, []byte) {
	code, b, _ := a.call(http.MethodPost, "/tasks/"+key+"/claim", map[string]any{})
	// A snagd still reconciling its leases at its start answers 503
	// starting, "try again in a moment": the agent does.
	for deadline := time.Now().Add(20 * time.Second); code == http.StatusServiceUnavailable &&
		bytes.Contains(b, []byte(`"error":"starting"`)) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		code, b, _ = a.call(http.MethodPost, "/tasks/"+key+"/claim", map[string]any{})
	}
	var c teamClaim
	json.Unmarshal(b, &c)
	return c, code, b
}

// status is task key's status as snagd d's index says.
func teamStatus(d *daemon, key string) string {
	var tk struct {
		Task struct {
			Status string `json:"status"`
		} `json:"task"`
	}
	d.get("/tasks/"+key, &tk)
	return tk.Task.Status
}

func (a *teamAgent) claimNext(t *testing.T) (teamClaim, int, string) {
	code, b, retry := a.call(http.MethodPost, "/claim", map[string]any{})
	var c teamClaim
	json.Unmarshal(b, &c)
	if code != http.StatusOK && code != http.StatusServiceUnavailable {
		t.Errorf("%s claim: %d %s", a.name, code, b)
	}
	return c, code, retry
}

// TestTeamClaimsExactlyOnceAcrossClones: three clones of one repository,
// each with its snagd on one PostgreSQL, and agents on each draining the
// queue through claim-next: every task is claimed exactly once, on one
// clone, and the shared state says each is done.
func TestTeamClaimsExactlyOnceAcrossClones(t *testing.T) {
	t.Parallel()
	n := 120
	bare := teamRepo(t, n, teamNoVerify)
	dsn := teamDB(t)
	var ds []*daemon
	for range 3 {
		ds = append(ds, startTeam(t, teamClone(t, bare), dsn, 15*time.Second))
	}
	pool := drainPool(t, dsn)
	var mu sync.Mutex
	claimed := map[string][]string{}
	var wg sync.WaitGroup
	for i := range 9 {
		d := ds[i%3]
		a := newTeamAgent(t, d)
		wg.Go(func() {
			// An agent told nothing is ready asks again until the shared
			// state says every task is done.
			for deadline := time.Now().Add(2 * time.Minute); ; {
				c, code, _ := a.claimNext(t)
				if code != http.StatusOK || c.Task == nil {
					if _, undone, err := leftIn(context.Background(), pool, n); err == nil && undone == 0 {
						return
					}
					if time.Now().After(deadline) {
						t.Errorf("%s: tasks are left undone in the shared state 2 minutes on, and none is ready", a.name)
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				mu.Lock()
				claimed[c.Task.Key] = append(claimed[c.Task.Key], fmt.Sprintf("%s@%d", a.name, d.port))
				mu.Unlock()
				code, b, _ := a.call(http.MethodPost, "/tasks/"+c.Task.Key+"/resolve", map[string]any{"epoch": c.Epoch})
				if code != http.StatusOK {
					t.Errorf("resolve %s: %d %s", c.Task.Key, code, b)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(claimed) != n {
		t.Fatalf("%d tasks claimed, want %d", len(claimed), n)
	}
	for k, by := range claimed {
		if len(by) != 1 {
			t.Fatalf("%s claimed %d times: %v", k, len(by), by)
		}
	}
}

// TestTeamKilledCloneLeasesFreedAfterGrace: SIGKILL one clone's snagd.
// After the grace its agents' leases are freed and taken by another
// clone; nobody else's lease is touched. Its restarted self releases the
// lease another clone took since, takes back at the same epoch the one no
// one took, and never grants one twice.
func TestTeamKilledCloneLeasesFreedAfterGrace(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 6, teamNoVerify)
	dsn := teamDB(t)
	root1, home1 := teamClone(t, bare), filepath.Join(t.TempDir(), "home")
	grace := 3 * time.Second
	d1 := startTeamHome(t, root1, home1, dsn, grace)
	d2 := startTeam(t, teamClone(t, bare), dsn, grace)
	a1, a1b, a2, b := newTeamAgent(t, d1), newTeamAgent(t, d1), newTeamAgent(t, d2), newTeamAgent(t, d2)
	a1.keepAlive(t)
	a1b.keepAlive(t)
	c1, code, body := a1.claim("SNAG-1")
	if code != http.StatusOK {
		t.Fatalf("claim SNAG-1 on clone 1: %d %s", code, body)
	}
	c1b, code, body := a1b.claim("SNAG-2")
	if code != http.StatusOK {
		t.Fatalf("claim SNAG-2 on clone 1: %d %s", code, body)
	}
	c2, code, body := a2.claim("SNAG-3")
	if code != http.StatusOK {
		t.Fatalf("claim SNAG-3 on clone 2: %d %s", code, body)
	}
	if _, code, body := b.claim("SNAG-1"); code != http.StatusConflict || !bytes.Contains(body, []byte(a1.name)) {
		t.Fatalf("claim of SNAG-1 on clone 2 while clone 1 holds it: %d %s, want 409 naming %s", code, body, a1.name)
	}

	d1.cmd.Process.Kill()
	<-d1.done
	killed := time.Now()
	var took time.Duration
	eventually(t, "clone 2 to get SNAG-1 once clone 1's grace is over", func() bool {
		c, code, _ := b.claim("SNAG-1")
		if code == http.StatusOK && c.Task != nil {
			took = time.Since(killed)
			return true
		}
		return false
	})
	// Silence is counted from the last heartbeat, which came at most one
	// beat before the kill.
	if took < grace-coord.DefaultHeartbeat {
		t.Fatalf("SNAG-1 was granted again %v after its holder's snagd died, before its grace of %v", took, grace)
	}
	t.Logf("SNAG-1 granted to another clone %v after its holder's snagd was killed (grace %v)", took.Round(100*time.Millisecond), grace)
	if code, body, _ := a2.call(http.MethodPost, "/tasks/SNAG-3/resolve", map[string]any{"epoch": c2.Epoch}); code != http.StatusOK {
		t.Fatalf("clone 2's own lease after the sweep: resolve SNAG-3: %d %s", code, body)
	}

	d1 = startTeamHome(t, root1, home1, dsn, grace)
	a1.to(d1)
	a1b.to(d1)
	eventually(t, "the restarted clone to release SNAG-1, which clone 2 holds now", func() bool {
		return teamStatus(d1, "SNAG-1") == "open"
	})
	if code, body, _ := a1.call(http.MethodPost, "/tasks/SNAG-1/resolve", map[string]any{"epoch": c1.Epoch}); code != http.StatusConflict {
		t.Fatalf("the killed clone's agent resolves SNAG-1 under its old epoch: %d %s, want 409", code, body)
	}
	if code, body, _ := a1b.call(http.MethodPost, "/tasks/SNAG-2/resolve", map[string]any{"epoch": c1b.Epoch}); code != http.StatusOK {
		t.Fatalf("SNAG-2, which no one took, resolved under its old epoch after the restart: %d %s", code, body)
	}
	if !d1.auditHas("release", "reconcile") || !d1.auditHas("reconcile", "taken back") {
		t.Fatal("the restarted clone's audit does not say which lease it released and which it took back")
	}
}

// teamProxy puts a TCP proxy (pgtest.Proxy) between a snagd and the
// test's database dsn, for the test to cut: it returns the proxy and the
// DSN through it.
func teamProxy(t *testing.T, dsn string) (*pgtest.Proxy, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", pgtest.Shared(t).Port)
	proxy, err := pgtest.NewProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return proxy, strings.Replace(dsn, addr, proxy.Addr(), 1)
}

// TestTeamPartitionedCloneFencedByEpoch: a clone's connection to the
// database is cut (a TCP proxy that stops forwarding). Its lease is given
// up after the grace and taken by another clone; when the connection
// comes back its agent's late resolve is refused by epoch.
func TestTeamPartitionedCloneFencedByEpoch(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 4, teamNoVerify)
	dsn := teamDB(t)
	proxy, u := teamProxy(t, dsn)
	grace := 3 * time.Second
	d1 := startTeam(t, teamClone(t, bare), u, grace)
	d2 := startTeam(t, teamClone(t, bare), dsn, grace)
	a1, b := newTeamAgent(t, d1), newTeamAgent(t, d2)
	a1.keepAlive(t)
	c1, code, body := a1.claim("SNAG-1")
	if code != http.StatusOK {
		t.Fatalf("claim: %d %s", code, body)
	}
	// An agent no connection stands for (MCP 2026-07-28 over /mcp) holds
	// SNAG-3 by its handles.
	modern := modernClient(t, d1, "sessionless")
	txt, isErr, sc := toolText(t, modern, "snag_claim", map[string]any{"id": "SNAG-3"})
	if isErr {
		t.Fatalf("a sessionless claim: %s", txt)
	}
	agent, _ := sc["agent"].(string)
	proxy.Cut()
	// A person's add needs a key from the store: refused at once, saying
	// why, with the header that tells a client not to wait it out.
	add, _ := http.NewRequest(http.MethodPost, d1.url("/tasks"), strings.NewReader(`{"title": "Added during the cut", "by": "dana"}`))
	add.Header.Set("Authorization", "Bearer "+d1.token)
	add.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(add); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(api.CoordHeader) == "" || !strings.Contains(string(b), api.CodeCoordUnreachable) {
			t.Errorf("a person's add during the cut: %d, %s %q, %s; want 503 coord_unreachable with the header", resp.StatusCode,
				api.CoordHeader, resp.Header.Get(api.CoordHeader), b)
		}
	}
	// Every answer to the agent says what the cut means for its lease.
	eventually(t, "an answer to the cut-off clone's agent that names its lease at risk", func() bool {
		h := a1.header(http.MethodGet, "/tasks/SNAG-2", api.CoordHeader)
		return strings.Contains(h, "your lease of SNAG-1 will be given up at ") || strings.Contains(h, "was given up")
	})
	// So does the answer to a call that names the sessionless agent.
	eventually(t, "an answer to the sessionless agent that names its lease at risk", func() bool {
		txt, _, _ := toolText(t, modern, "snag_claim", map[string]any{"agent": agent})
		return strings.Contains(txt, "your lease of SNAG-3 will be given up at ") || strings.Contains(txt, "was given up")
	})
	eventually(t, "clone 2 to get SNAG-1 once the cut-off clone's grace is over", func() bool {
		c, code, _ := b.claim("SNAG-1")
		return code == http.StatusOK && c.Task != nil
	})
	eventually(t, "the cut-off clone to give its lease up by its own clock", func() bool {
		return teamStatus(d1, "SNAG-1") == "open"
	})
	proxy.Heal()
	code, body, _ = a1.call(http.MethodPost, "/tasks/SNAG-1/resolve", map[string]any{"epoch": c1.Epoch})
	if code != http.StatusConflict {
		t.Fatalf("the late resolve of the partitioned clone: %d %s, want 409 (stale)", code, body)
	}
	eventually(t, "the partitioned clone to join again", func() bool {
		_, code, _ := a1.claim("SNAG-2")
		return code == http.StatusOK
	})
}

// teamDrain has agents claim the next task and resolve it, retrying
// answers that say to (503 with Retry-After), until they are told nothing
// is ready and done says they may stop (the shared state says every task
// is done); it returns how many times each task was claimed and how many
// retryable answers came. A claim acknowledged and then refused at its
// resolve is a lost claim, and fails the test.
func teamDrain(t *testing.T, agents []*teamAgent, done func() bool) (map[string]int, int) {
	var mu sync.Mutex
	claimed := map[string]int{}
	retries := 0
	retry := func(code int, after string) bool {
		if code != http.StatusServiceUnavailable {
			return false
		}
		if after == "" {
			t.Errorf("a 503 without Retry-After")
		}
		mu.Lock()
		retries++
		mu.Unlock()
		time.Sleep(200 * time.Millisecond)
		return true
	}
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() {
			// An agent told nothing is ready asks again until done.
			for deadline := time.Now().Add(3 * time.Minute); ; {
				code, b, after := a.call(http.MethodPost, "/claim", map[string]any{})
				if retry(code, after) {
					continue
				}
				var c teamClaim
				json.Unmarshal(b, &c)
				if code != http.StatusOK || c.Task == nil {
					if code != http.StatusOK {
						t.Errorf("%s claim: %d %s", a.name, code, b)
						return
					}
					if done() {
						return
					}
					if time.Now().After(deadline) {
						t.Errorf("%s: nothing is ready, and the drain is not done 3 minutes on", a.name)
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				mu.Lock()
				claimed[c.Task.Key]++
				mu.Unlock()
				for {
					code, b, after := a.call(http.MethodPost, "/tasks/"+c.Task.Key+"/resolve", map[string]any{"epoch": c.Epoch})
					if retry(code, after) {
						continue
					}
					if code != http.StatusOK {
						t.Errorf("%s's acknowledged claim of %s was lost: resolve %d %s", a.name, c.Task.Key, code, b)
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	return claimed, retries
}

// TestTeamDatabaseRestartMidRun: PostgreSQL stops for 10 s while agents
// on two clones drain the queue, then starts again. Agents get retryable
// answers meanwhile; no task is granted twice and no acknowledged claim
// is lost.
func TestTeamDatabaseRestartMidRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgtest.Start(ctx)
	if err != nil {
		pgtest.Shared(t) // skips or fails as the shared cluster would
		t.Fatal(err)
	}
	defer c.Close()
	db, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dsn := c.DSN(db)
	if _, err := coord.Init(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	n := 150
	bare := teamRepo(t, n, teamNoVerify)
	// The grace covers the outage, PostgreSQL's restart and the heartbeat
	// of margin a clone gives its leases up before its grace ends.
	d1 := startTeam(t, teamClone(t, bare), dsn, 20*time.Second)
	d2 := startTeam(t, teamClone(t, bare), dsn, 20*time.Second)
	var agents []*teamAgent
	for i := range 6 {
		a := newTeamAgent(t, []*daemon{d1, d2}[i%2])
		a.keepAlive(t)
		agents = append(agents, a)
	}
	outage := make(chan struct{})
	go func() {
		defer close(outage)
		time.Sleep(1500 * time.Millisecond) // the scenario: the outage comes while the agents drain
		if err := c.Stop(ctx); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(10 * time.Second) // the scenario: the outage lasts 10 s
		if err := c.Start(ctx); err != nil {
			t.Error(err)
		}
	}()
	// The agents stop once the outage is over and the shared state says
	// every task is done: they are at work, or asking, all through it.
	pool := drainPool(t, dsn)
	claimed, retries := teamDrain(t, agents, func() bool {
		select {
		case <-outage:
		default:
			return false
		}
		_, undone, err := leftIn(ctx, pool, n)
		return err == nil && undone == 0
	})
	<-outage
	if len(claimed) != n {
		t.Fatalf("%d tasks claimed, want %d", len(claimed), n)
	}
	for k, times := range claimed {
		if times != 1 {
			t.Fatalf("%s claimed %d times", k, times)
		}
	}
	if retries == 0 {
		t.Fatal("no agent was told to retry while the database was down")
	}
	t.Logf("%d retryable answers while PostgreSQL was down for 10 s", retries)
	if strings.Contains(d1.log.String()+d2.log.String(), c.Password) {
		t.Fatal("a snagd log holds the database password")
	}
}

// TestTeamAliasesAcrossBranches: two clones on two branches add 200
// tasks each at the same time. Every alias is distinct, and a real git
// merge of the two branches has no two files with one alias.
func TestTeamAliasesAcrossBranches(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 3, teamNoVerify)
	dsn := teamDB(t)
	r1, r2 := teamClone(t, bare), teamClone(t, bare)
	git(t, r1, "checkout", "-qb", "feat/one")
	git(t, r2, "checkout", "-qb", "feat/two")
	d1 := startTeam(t, r1, dsn, 15*time.Second)
	d2 := startTeam(t, r2, dsn, 15*time.Second)
	var mu sync.Mutex
	keys := map[string]string{}
	var wg sync.WaitGroup
	for i, d := range []*daemon{d1, d2} {
		for w := range 4 {
			wg.Go(func() {
				for k := range 50 {
					var out struct {
						Key string `json:"key"`
					}
					code := d.do(http.MethodPost, "/tasks", map[string]any{"title": fmt.Sprintf("Clone %d task %d-%d", i+1, w, k), "kind": "bug"}, &out)
					if code != http.StatusCreated {
						t.Errorf("add on clone %d: %d", i+1, code)
						return
					}
					mu.Lock()
					if other, dup := keys[out.Key]; dup {
						t.Errorf("%s minted twice: clone %d and %s", out.Key, i+1, other)
					}
					keys[out.Key] = fmt.Sprintf("clone %d", i+1)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(keys) != 400 {
		t.Fatalf("%d distinct aliases, want 400", len(keys))
	}
	for _, r := range []string{r1, r2} {
		git(t, r, "add", "-A", ".snag/tasks")
		git(t, r, "commit", "-qm", "tasks of "+filepath.Base(r))
		git(t, r, "push", "-q", "origin", "HEAD")
	}
	git(t, r1, "pull", "-q", "--no-rebase", "origin", "feat/two")
	if out := git(t, r1, "status", "--porcelain"); strings.TrimSpace(out) != "" {
		t.Fatalf("the merge left changes: %s", out)
	}
	seen := map[string]string{}
	ents, _ := os.ReadDir(filepath.Join(r1, ".snag", "tasks"))
	for _, e := range ents {
		key, _, _ := strings.Cut(e.Name(), " ")
		if other, dup := seen[key]; dup {
			t.Fatalf("after the merge %s and %s share the alias %s", other, e.Name(), key)
		}
		seen[key] = e.Name()
	}
	if len(seen) != 403 {
		t.Fatalf("%d task files after the merge, want 403", len(seen))
	}
}

// TestTeamEventsAcrossClones: a claim on clone A appears on clone B's
// /events, labelled as the team's, within a second; the latency is
// measured.
func TestTeamEventsAcrossClones(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 30, teamNoVerify)
	dsn := teamDB(t)
	d1 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	d2 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d2.url("/events"), nil)
	req.Header.Set("Authorization", "Bearer "+d2.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		buf := make([]byte, 64<<10)
		var acc string
		for {
			n, err := resp.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n")
				if i < 0 {
					break
				}
				lines <- acc[:i]
				acc = acc[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	// Clone B hears clone A once its listener is up: the agent's session,
	// registered on A, shows there first.
	var a *teamAgent
	heard := false
	for try := 0; try < 50 && !heard; try++ {
		a = newTeamAgent(t, d1)
		timeout := time.After(200 * time.Millisecond)
	session:
		for {
			select {
			case l := <-lines:
				if strings.HasPrefix(l, "data:") && strings.Contains(l, `"name":"`+a.name+`"`) && strings.Contains(l, `"source":"team"`) {
					heard = true
					break session
				}
			case <-timeout:
				break session
			}
		}
	}
	if !heard {
		t.Fatal("clone B's /events never showed a session registered on clone A")
	}
	var lat []time.Duration
	for i := 1; i <= 20; i++ {
		key := fmt.Sprintf("SNAG-%d", i)
		start := time.Now()
		c, code, body := a.claim(key)
		if code != http.StatusOK {
			t.Fatalf("claim %s: %d %s", key, code, body)
		}
		deadline := time.After(5 * time.Second)
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("clone B's /events ended")
				}
				if strings.HasPrefix(l, "data:") && strings.Contains(l, `"`+key+`"`) && strings.Contains(l, `"source":"team"`) {
					lat = append(lat, time.Since(start))
					break wait
				}
			case <-deadline:
				t.Fatalf("clone B's /events did not show the claim of %s on clone A within 5 s", key)
			}
		}
		if code, body, _ := a.call(http.MethodPost, "/tasks/"+key+"/resolve", map[string]any{"epoch": c.Epoch}); code != http.StatusOK {
			t.Fatalf("resolve %s: %d %s", key, code, body)
		}
	}
	t.Logf("claim on clone A to clone B's /events, %d claims: p50 %.1f ms, p99 %.1f ms", len(lat), percentile(lat, 0.50), percentile(lat, 0.99))
}

// TestTeamFileClaimsAcrossClones: an exclusive file claim on one clone
// keeps an overlapping claim on another clone out, naming the holder and
// its machine; both clones list it; once released, the other gets it.
func TestTeamFileClaimsAcrossClones(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 2, teamNoVerify)
	dsn := teamDB(t)
	d1 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	d2 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	a, b := newTeamAgent(t, d1), newTeamAgent(t, d2)
	if code, body, _ := a.call(http.MethodPost, "/files/claim", map[string]any{"paths": []string{"web/app.ts"}}); code != http.StatusOK {
		t.Fatalf("claim on clone 1: %d %s", code, body)
	}
	host, _ := os.Hostname()
	granted := func(a *teamAgent, path string) (bool, string) {
		code, body, _ := a.call(http.MethodPost, "/files/claim", map[string]any{"paths": []string{path}})
		var out struct {
			Granted bool `json:"granted"`
		}
		json.Unmarshal(body, &out)
		if code != http.StatusOK {
			t.Fatalf("claim %s: %d %s", path, code, body)
		}
		return out.Granted, string(body)
	}
	if ok, body := granted(b, "web/**"); ok || !strings.Contains(body, a.name+" on "+host) {
		t.Fatalf("an overlapping claim on clone 2: %s, want it refused naming %s on %s", body, a.name, host)
	}
	var files struct {
		Claims []struct {
			Path   string `json:"path"`
			Holder string `json:"holder"`
		} `json:"claims"`
	}
	d2.get("/files", &files)
	if len(files.Claims) != 1 || files.Claims[0].Path != "web/app.ts" || files.Claims[0].Holder != a.name+" on "+host {
		t.Fatalf("clone 2's /files: %+v, want clone 1's claim of web/app.ts", files)
	}
	if code, body, _ := a.call(http.MethodPost, "/files/release", map[string]any{"paths": []string{"web/app.ts"}}); code != http.StatusOK {
		t.Fatalf("release on clone 1: %d %s", code, body)
	}
	eventually(t, "clone 2's claim once clone 1 released", func() bool {
		ok, _ := granted(b, "web/**")
		return ok
	})
	if ok, body := granted(a, "web/app.ts"); ok {
		t.Fatalf("clone 1 claims under clone 2's glob: %s, want it refused", body)
	}
}

// TestTeamNamesAndSharedAudit: agents on two clones never get one name,
// and a claim on one clone is in the audit log the clones share, with its
// machine.
func TestTeamNamesAndSharedAudit(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 2, teamNoVerify)
	dsn := teamDB(t)
	d1 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	d2 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	names := map[string]bool{}
	var first *teamAgent
	for i := range 6 {
		a := newTeamAgent(t, []*daemon{d1, d2}[i%2])
		if first == nil {
			first = a
		}
		if names[a.name] {
			t.Fatalf("the name %s was given twice across the clones", a.name)
		}
		names[a.name] = true
		// The next registration on the other clone must see this one.
		eventually(t, "the session in the shared state", func() bool {
			st, err := coord.Status(context.Background(), dsn, filepath.Dir(bare)+"/origin")
			if err != nil {
				return false
			}
			n := 0
			for _, c := range st.Clones {
				n += len(c.Sessions)
			}
			return n == i+1
		})
	}
	if _, code, body := first.claim("SNAG-1"); code != http.StatusOK {
		t.Fatalf("claim: %d %s", code, body)
	}
	obs, err := coord.Open(context.Background(), dsn, coord.Options{Workspace: filepath.Dir(bare) + "/origin", Host: "observer", Root: "/observer"})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	eventually(t, "the claim in the shared audit log", func() bool {
		log, err := obs.AuditLog(context.Background(), 0, 1000)
		if err != nil {
			return false
		}
		for _, e := range log {
			if e.Action == "claim" && e.Agent == first.name && e.Outcome == "ok" && e.Host != "" {
				return true
			}
		}
		return false
	})
}

// TestTeamContextAcrossClones: what an agent on clone A holds, claims,
// reports, hands off and writes reaches an agent's snag_context on clone
// B: A's task and file claim, its report, the handoff to B (once), and
// its decision and inbox item, labelled as the team's and not yet in B's
// files.
func TestTeamContextAcrossClones(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 3, teamNoVerify)
	dsn := teamDB(t)
	d1 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	d2 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	a, b := newTeamAgent(t, d1), newTeamAgent(t, d2)
	host, _ := os.Hostname()
	must := func(code int, body []byte, what string) {
		t.Helper()
		if code/100 != 2 {
			t.Fatalf("%s: %d %s", what, code, body)
		}
	}
	_, code, body := a.claim("SNAG-1")
	must(code, body, "claim")
	code, body, _ = a.call(http.MethodPost, "/files/claim", map[string]any{"paths": []string{"internal/parser.go"}})
	must(code, body, "claim files")
	code, body, _ = a.call(http.MethodPost, "/reports", map[string]any{"message": "parser half done", "task": "SNAG-1"})
	must(code, body, "report")
	code, body, _ = a.call(http.MethodPost, "/handoffs", map[string]any{"to": b.name, "title": "take the lexer after me"})
	must(code, body, "handoff")
	// The addressee is connected, on the other clone: the answer says so.
	var sent struct {
		Live bool
		Host string
	}
	if json.Unmarshal([]byte(body), &sent); !sent.Live || sent.Host == "" {
		t.Errorf("a handoff to %s, connected on the other clone, answered %s; want live, naming its machine", b.name, body)
	}
	code, body, _ = a.call(http.MethodPost, "/notes", map[string]any{"title": "Parse with a Pratt parser", "type": "decision",
		"body": "Precedence climbing is simpler to extend.", "branch": "main"})
	must(code, body, "note")
	code, body, _ = a.call(http.MethodPost, "/tasks", map[string]any{"title": "Lexer drops the last token", "kind": "bug"})
	must(code, body, "inbox item")

	type ctxAnswer struct {
		Others []struct {
			Name  string `json:"name"`
			Tasks []struct {
				Key string `json:"key"`
			} `json:"tasks"`
			Files []struct {
				Path string `json:"path"`
			} `json:"files"`
		} `json:"others"`
		Handoffs []struct {
			From  string `json:"from"`
			Title string `json:"title"`
		} `json:"handoffs"`
		Reports []struct {
			From string `json:"from"`
			Body string `json:"body"`
		} `json:"reports"`
		Team []struct {
			Source, Kind, Key, Title, From, Host, Branch string
		} `json:"team"`
	}
	read := func() ctxAnswer {
		code, body, _ := b.call(http.MethodPost, "/context", map[string]any{})
		must(code, body, "context")
		var c ctxAnswer
		json.Unmarshal(body, &c)
		return c
	}
	// A handoff is shown in one context only: a read before the rest of
	// clone A's work has arrived may be the one that shows it, so every
	// read's handoffs are kept.
	var c ctxAnswer
	var handoffs []struct {
		From  string `json:"from"`
		Title string `json:"title"`
	}
	eventually(t, "clone A's work in the context of an agent on clone B", func() bool {
		c = read()
		handoffs = append(handoffs, c.Handoffs...)
		return len(c.Team) == 2 && len(c.Reports) > 0 && len(c.Others) > 0 && len(handoffs) > 0
	})
	c.Handoffs = handoffs
	who := a.name + " on " + host
	if o := c.Others[0]; o.Name != who || len(o.Tasks) != 1 || o.Tasks[0].Key != "SNAG-1" || len(o.Files) != 1 || o.Files[0].Path != "internal/parser.go" {
		t.Fatalf("the other clone's agent: %+v, want %s holding SNAG-1 and internal/parser.go", c.Others, who)
	}
	if c.Reports[0].From != who || c.Reports[0].Body != "parser half done" {
		t.Fatalf("reports: %+v", c.Reports)
	}
	if len(c.Handoffs) != 1 || c.Handoffs[0].From != who || c.Handoffs[0].Title != "take the lexer after me" {
		t.Fatalf("handoffs: %+v", c.Handoffs)
	}
	kinds := map[string]string{}
	for _, it := range c.Team {
		if it.Source != "team" || it.From != a.name || it.Host != host || it.Branch != "main" {
			t.Fatalf("a team item: %+v", it)
		}
		kinds[it.Kind] = it.Title
	}
	if kinds["note"] != "Parse with a Pratt parser" || kinds["inbox"] != "Lexer drops the last token" {
		t.Fatalf("team items: %+v", c.Team)
	}
	if again := read(); len(again.Handoffs) != 0 {
		t.Fatalf("the handoff shown again: %+v", again.Handoffs)
	}
}

// TestTeamHandoffMovesTheSharedLease: a handoff of a claimed task to
// another agent of the same clone moves the lease in the shared state
// too, under a new epoch: another clone still cannot claim it, the old
// holder's epoch is stale, and the new holder resolves it.
func TestTeamHandoffMovesTheSharedLease(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 2, teamNoVerify)
	dsn := teamDB(t)
	d1 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	d2 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	a, c, b := newTeamAgent(t, d1), newTeamAgent(t, d1), newTeamAgent(t, d2)
	a.keepAlive(t)
	c.keepAlive(t)
	got, code, body := a.claim("SNAG-1")
	if code != http.StatusOK {
		t.Fatalf("claim: %d %s", code, body)
	}
	code, body, _ = a.call(http.MethodPost, "/handoffs", map[string]any{"to": c.name, "title": "finish it", "task": "SNAG-1"})
	var h struct {
		Moved bool  `json:"moved"`
		Epoch int64 `json:"epoch"`
	}
	json.Unmarshal(body, &h)
	if code != http.StatusCreated || !h.Moved || h.Epoch <= got.Epoch {
		t.Fatalf("handoff: %d %s, want the lease moved under a new epoch", code, body)
	}
	if _, code, body := b.claim("SNAG-1"); code != http.StatusConflict || !strings.Contains(string(body), c.name) {
		t.Fatalf("another clone claims the handed-off task: %d %s, want 409 naming %s", code, body, c.name)
	}
	if code, body, _ := a.call(http.MethodPost, "/tasks/SNAG-1/resolve", map[string]any{"epoch": got.Epoch}); code != http.StatusConflict {
		t.Fatalf("the old holder resolves: %d %s, want 409", code, body)
	}
	if code, body, _ := c.call(http.MethodPost, "/tasks/SNAG-1/resolve", map[string]any{"epoch": h.Epoch}); code != http.StatusOK {
		t.Fatalf("the new holder resolves: %d %s", code, body)
	}
}

// TestTeamPulledClaimIsLeftAlone: a task file that git brings from
// another clone saying claimed is that clone's agent's work: this clone
// neither releases it (its file stays as git wrote it), nor grants it,
// at its start or after.
func TestTeamPulledClaimIsLeftAlone(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 2, teamNoVerify)
	dsn := teamDB(t)
	r1, home1 := teamClone(t, bare), filepath.Join(t.TempDir(), "home")
	r2 := teamClone(t, bare)
	d1 := startTeamHome(t, r1, home1, dsn, 15*time.Second)
	d2 := startTeam(t, r2, dsn, 15*time.Second)
	b, a := newTeamAgent(t, d2), newTeamAgent(t, d1)
	if _, code, body := b.claim("SNAG-1"); code != http.StatusOK {
		t.Fatalf("claim on clone 2: %d %s", code, body)
	}
	git(t, r2, "commit", "-qam", "claimed SNAG-1")
	git(t, r2, "push", "-q", "origin", "HEAD")
	git(t, r1, "pull", "-q", "--no-rebase", "origin", "main")
	eventually(t, "clone 1 to read the pulled claim", func() bool { return teamStatus(d1, "SNAG-1") == "claimed" })
	if _, code, body := a.claim("SNAG-1"); code != http.StatusConflict {
		t.Fatalf("clone 1 claims the pulled claimed task: %d %s, want 409", code, body)
	}
	d1.p.Stop()
	d1 = startTeamHome(t, r1, home1, dsn, 15*time.Second)
	d1.waitProgress("the start's reconcile with the store", 1, reconciles)
	if st := teamStatus(d1, "SNAG-1"); st != "claimed" {
		t.Fatalf("after clone 1's restart SNAG-1 is %s, want claimed as git wrote it", st)
	}
	if out := git(t, r1, "status", "--porcelain", ".snag/tasks"); strings.TrimSpace(out) != "" {
		t.Fatalf("clone 1 changed a task file git brought: %s", out)
	}
}

// TestTeamActivityAcrossBranches: what an agent does on a clone working
// on another branch shows in this clone's activity by branch: the task it
// holds, what it claimed and resolved, and its last report.
func TestTeamActivityAcrossBranches(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 3, teamNoVerify)
	dsn := teamDB(t)
	r1 := teamClone(t, bare)
	git(t, r1, "checkout", "-qb", "feat/lexer")
	d1 := startTeam(t, r1, dsn, 15*time.Second)
	d2 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	a := newTeamAgent(t, d1)
	a.keepAlive(t)
	c, code, body := a.claim("SNAG-1")
	if code != http.StatusOK {
		t.Fatalf("claim: %d %s", code, body)
	}
	if code, body, _ := a.call(http.MethodPost, "/reports", map[string]any{"message": "lexer rewritten", "task": "SNAG-1"}); code/100 != 2 {
		t.Fatalf("report: %d %s", code, body)
	}
	if code, body, _ := a.call(http.MethodPost, "/tasks/SNAG-1/resolve", map[string]any{"epoch": c.Epoch}); code != http.StatusOK {
		t.Fatalf("resolve: %d %s", code, body)
	}
	if _, code, body := a.claim("SNAG-2"); code != http.StatusOK {
		t.Fatalf("claim: %d %s", code, body)
	}
	host, _ := os.Hostname()
	var feed api.ActivityFeed
	eventually(t, "clone 1's work on feat/lexer in clone 2's activity", func() bool {
		feed = api.ActivityFeed{}
		d2.get("/branches", &feed)
		for _, b := range feed.Recent {
			if b.Branch == "feat/lexer" && slices.Contains(b.Claimed, "SNAG-1") && slices.Contains(b.Resolved, "SNAG-1") &&
				b.Report != nil && b.Report.Message == "lexer rewritten" {
				return true
			}
		}
		return false
	})
	var held bool
	for _, tl := range feed.Tasks {
		held = held || tl.Key == "SNAG-2" && tl.Holder == a.name+" on "+host && tl.Branch == "feat/lexer"
	}
	if !held {
		t.Fatalf("clone 2's activity does not show %s on %s holding SNAG-2 on feat/lexer: %+v", a.name, host, feed.Tasks)
	}
}

// TestTeamLoneCloneRestartKeepsLeases: a clone alone in its workspace,
// stopped for longer than the grace, finds its leases where it left them
// when it starts again: no other clone ended it, so none was freed.
func TestTeamLoneCloneRestartKeepsLeases(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 2, teamNoVerify)
	dsn := teamDB(t)
	root, home := teamClone(t, bare), filepath.Join(t.TempDir(), "home")
	grace := 2 * time.Second
	d := startTeamHome(t, root, home, dsn, grace)
	a := newTeamAgent(t, d)
	a.keepAlive(t)
	c, code, body := a.claim("SNAG-1")
	if code != http.StatusOK {
		t.Fatalf("claim: %d %s", code, body)
	}
	d.p.Stop()
	// snagd stays down until the store has not heard from it for twice
	// its grace.
	pool := drainPool(t, dsn)
	eventually(t, "the stopped clone silent past twice its grace in the store", func() bool {
		var silent bool
		err := pool.QueryRow(context.Background(), `SELECT bool_and(seen < now() - $2::interval) FROM clones WHERE root = $1`,
			root, (2 * grace).String()).Scan(&silent)
		return err == nil && silent
	})
	d = startTeamHome(t, root, home, dsn, grace)
	a.to(d)
	d.waitProgress("the start's reconcile with the store", 1, reconciles)
	if st := teamStatus(d, "SNAG-1"); st != "claimed" {
		t.Fatalf("SNAG-1 is %s after the restart, want claimed", st)
	}
	if code, body, _ := a.call(http.MethodPost, "/tasks/SNAG-1/resolve", map[string]any{"epoch": c.Epoch}); code != http.StatusOK {
		t.Fatalf("resolve under the epoch from before the restart: %d %s", code, body)
	}
}

// TestTeamSessionEndUnsentAtACrashIsReconciled: a person ends an agent's
// session while its clone is cut off from the store, so the end waits in
// the outbox, and snagd is killed before it is sent. The store still has
// the session live, holding its task and its name across the workspace.
// The restarted snagd ends it there at its start (the reconcile), so the
// name is free for an agent of another clone and the task for any claim.
func TestTeamSessionEndUnsentAtACrashIsReconciled(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 2, teamNoVerify)
	dsn := teamDB(t)
	proxy, u := teamProxy(t, dsn)
	c := pgtest.Shared(t)
	root, home := teamClone(t, bare), filepath.Join(t.TempDir(), "home")
	grace := time.Minute // no clone is swept, and none gives up, in this test
	d1 := startTeamHome(t, root, home, u, grace)
	a := newTeamAgent(t, d1)
	if _, code, body := a.claim("SNAG-1"); code != http.StatusOK {
		t.Fatalf("claim: %d %s", code, body)
	}

	proxy.Cut()
	if code := d1.do(http.MethodPost, "/sessions/"+strconv.FormatInt(a.session, 10)+"/end", map[string]any{"reason": "gone for the day"}, nil); code != http.StatusOK {
		t.Fatalf("end the session: %d", code)
	}
	if st := teamStatus(d1, "SNAG-1"); st != "open" {
		t.Fatalf("SNAG-1 after its holder's session ended: %s, want open", st)
	}
	d1.cmd.Process.Kill()
	<-d1.done
	proxy.Heal()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the store: %s", strings.ReplaceAll(err.Error(), c.Password, "[redacted]"))
	}
	defer conn.Close(ctx)
	live := func() bool {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE name = $1 AND ended IS NULL`, a.name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	held := func() bool {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM leases WHERE key = 'SNAG-1' AND state = 'held'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	if !live() || !held() {
		t.Fatalf("the test did not reach its state: with the end unsent, the store should still have %s live (%v) holding SNAG-1 (%v)", a.name, live(), held())
	}

	d1 = startTeamHome(t, root, home, u, grace)
	eventually(t, "the restarted clone to end the session in the store", func() bool { return !live() && !held() })
	// The store hears the end before the audit entry is written: the
	// entry follows.
	eventually(t, "the restarted clone's audit to say it ended the session in the store", func() bool {
		return d1.auditHas("reconcile", "the session had ended here before snagd stopped")
	})
	d2 := startTeam(t, teamClone(t, bare), dsn, grace)
	var s struct{ Name string }
	if code := d2.do(http.MethodPost, "/sessions", map[string]any{"client": "team-test", "client_version": "1", "name": a.name,
		"pid": os.Getpid(), "transport": "stdio", "root": d2.root}, &s); code != http.StatusCreated || s.Name != a.name {
		t.Fatalf("an agent of another clone asks for %s: %d, given %q", a.name, code, s.Name)
	}
}

// TestT5_ResolveOnceThroughACut: three clones drain the queue, and one is
// cut from PostgreSQL (a TCP proxy that stops forwarding) for longer than
// its grace, then healed. Its agents' resolves during the cut are never
// acknowledged (the store must hear a finish before it is written), it
// gives its leases up before the others may sweep them, and after the
// heal it joins again and drains with the others. Every task is resolved
// exactly once: one acknowledged resolve each, and its file says resolved
// in one clone only, so the clones' branches merge without a conflict.
func TestT5_ResolveOnceThroughACut(t *testing.T) {
	t.Parallel()
	const n, perClone = 60, 2
	bare := teamRepo(t, n, teamNoVerify)
	dsn := teamDB(t)
	proxy, cut := teamProxy(t, dsn)
	grace := 3 * time.Second
	ds := []*daemon{startTeam(t, teamClone(t, bare), cut, grace), startTeam(t, teamClone(t, bare), dsn, grace), startTeam(t, teamClone(t, bare), dsn, grace)}
	pool := drainPool(t, dsn)
	waitPublished(t, pool, 3, n)

	var mu sync.Mutex
	acked := map[string][]string{} // task -> the agents whose resolve of it was acknowledged
	// The queue is drained once every task is done in the store and the
	// cut clone is back and reconciled: until then the store may have a
	// task done whose finish it heard from the cut clone while the answer
	// was lost, and which that clone takes back when it joins again.
	var back atomic.Bool
	var wg sync.WaitGroup
	for c, d := range ds {
		for range perClone {
			a := newTeamAgent(t, d)
			a.keepAlive(t)
			wg.Go(func() {
				for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
					code, b, _ := a.call(http.MethodPost, "/claim", map[string]any{})
					var got teamClaim
					json.Unmarshal(b, &got)
					if code == http.StatusServiceUnavailable || code == http.StatusOK && got.Task == nil {
						if _, undone, err := leftIn(context.Background(), pool, n); err == nil && undone == 0 && back.Load() {
							return
						}
						time.Sleep(50 * time.Millisecond)
						continue
					}
					if code != http.StatusOK {
						t.Errorf("clone %d's %s claim: %d %s", c+1, a.name, code, b)
						return
					}
					for {
						code, b, _ := a.call(http.MethodPost, "/tasks/"+got.Task.Key+"/resolve", map[string]any{"epoch": got.Epoch})
						if code == http.StatusServiceUnavailable {
							time.Sleep(100 * time.Millisecond)
							continue
						}
						if code == http.StatusOK {
							mu.Lock()
							acked[got.Task.Key] = append(acked[got.Task.Key], fmt.Sprintf("clone %d's %s", c+1, a.name))
							mu.Unlock()
						} else if c != 0 {
							t.Errorf("clone %d (never cut) lost its agent's claim of %s: resolve %d %s", c+1, got.Task.Key, code, b)
						}
						break // a lease given up in the cut: the agent claims again
					}
				}
				t.Errorf("clone %d's %s did not see the queue drained within two minutes", c+1, a.name)
			})
		}
	}
	eventually(t, "a third of the tasks to be done", func() bool {
		_, undone, err := leftIn(context.Background(), pool, n)
		return err == nil && undone <= n-n/3
	})
	rejoined := ds[0].progress().Reconciles + 1
	proxy.Cut()
	eventually(t, "the cut clone to give its leases up", func() bool {
		return strings.Contains(ds[0].log.String(), "giving up every lease of this clone")
	})
	eventually(t, "the others to sweep the cut clone", func() bool {
		var ended int
		pool.QueryRow(context.Background(), `SELECT count(*) FROM clones WHERE root = $1 AND ended IS NOT NULL`, ds[0].root).Scan(&ended)
		return ended == 1
	})
	proxy.Heal()
	ds[0].waitProgress("the cut clone's reconcile once it joined again", rejoined, reconciles)
	back.Store(true)
	wg.Wait()

	for i := 1; i <= n; i++ {
		key := queue.Alias(i)
		if len(acked[key]) != 1 {
			t.Errorf("%s: %d acknowledged resolves (%v), want 1", key, len(acked[key]), acked[key])
		}
		var in []string
		for c, d := range ds {
			for _, f := range readTaskFiles(t, d.root) {
				if f.task != nil && f.task.Key == key && f.task.Status == queue.StatusResolved {
					in = append(in, fmt.Sprintf("clone %d", c+1))
				}
			}
		}
		if len(in) != 1 {
			t.Errorf("%s is resolved in the files of %v, want exactly one clone", key, in)
		}
	}
	if _, undone, err := leftIn(context.Background(), pool, n); err != nil || undone != 0 {
		t.Errorf("%d tasks not done in the shared state (%v)", undone, err)
	}
	if strings.Contains(ds[0].log.String(), "answered before the coordination store heard") {
		t.Error("the cut clone answered a resolve the store had not heard")
	}
}

// TestTeamNamesOnceWhateverTheStartOrder: eight agents register on each
// of three clones at the same instant, as an orchestrator starts them.
// Every live agent of the workspace has a name of its own, in every
// clone's sessions and in the shared state: a registration that lost a
// race for a name (even one that waited in a clone's outbox) is renamed,
// never left live under the name another clone's agent has.
func TestTeamNamesOnceWhateverTheStartOrder(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 2, teamNoVerify)
	dsn := teamDB(t)
	ds := []*daemon{startTeam(t, teamClone(t, bare), dsn, 15*time.Second), startTeam(t, teamClone(t, bare), dsn, 15*time.Second),
		startTeam(t, teamClone(t, bare), dsn, 15*time.Second)}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, d := range ds {
		for range 8 {
			wg.Go(func() {
				<-start
				var s struct {
					ID   int64  `json:"id"`
					Name string `json:"name"`
				}
				if code := d.do(http.MethodPost, "/sessions", map[string]any{"client": "team-test", "client_version": "1",
					"pid": os.Getpid(), "transport": "stdio", "root": d.root}, &s); code != http.StatusCreated {
					t.Errorf("register: %d", code)
					return
				}
				(&teamAgent{d: d, session: s.ID, name: s.Name}).keepAlive(t) // live as a bridge keeps it
			})
		}
	}
	close(start)
	wg.Wait()
	ws := filepath.Dir(bare) + "/origin"
	var shared []string
	waitUntil(t, "24 live sessions in the shared state", func() bool {
		st, err := coord.Status(context.Background(), dsn, ws)
		if err != nil {
			return false
		}
		shared = shared[:0]
		for _, c := range st.Clones {
			shared = append(shared, c.Sessions...)
		}
		return len(shared) == 24
	}, func() string { return fmt.Sprintf("the shared state has %d: %v", len(shared), shared) })
	seen := map[string]int{}
	for c, d := range ds {
		var ss struct {
			Sessions []struct {
				Name  string `json:"name"`
				Ended string `json:"ended"`
			} `json:"sessions"`
		}
		d.get("/sessions", &ss)
		for _, s := range ss.Sessions {
			if s.Ended == "" {
				seen[s.Name]++
			}
		}
		if len(ss.Sessions) != 8 {
			t.Errorf("clone %d lists %d sessions, want 8", c+1, len(ss.Sessions))
		}
	}
	for name, times := range seen {
		if times > 1 {
			t.Errorf("%s is live on %d clones", name, times)
		}
	}
	if len(seen) != 24 {
		t.Errorf("%d distinct live names across the clones, want 24: %v", len(seen), seen)
	}
}

// waitUntil is eventually with what the test saw last, for its failure.
func waitUntil(t *testing.T, what string, cond func() bool, saw func() string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s: %s", what, saw())
}

// TestTeamHeldOnAnotherCloneIsNotFree: a task an agent of clone 2 holds
// reads claimed by that agent, on its machine, in clone 1, whose file
// still says open (the claim has not travelled by git): in a show, in a
// list, and in snag list; clone 1's claim of it is refused. Once it is
// released there, clone 1 shows it open again.
func TestTeamHeldOnAnotherCloneIsNotFree(t *testing.T) {
	t.Parallel()
	bare := teamRepo(t, 2, teamNoVerify)
	dsn := teamDB(t)
	r1, home1 := teamClone(t, bare), filepath.Join(t.TempDir(), "home")
	d1 := startTeamHome(t, r1, home1, dsn, 15*time.Second)
	d2 := startTeam(t, teamClone(t, bare), dsn, 15*time.Second)
	a, b := newTeamAgent(t, d1), newTeamAgent(t, d2)
	c, code, body := b.claim("SNAG-1")
	if code != http.StatusOK {
		t.Fatalf("claim on clone 2: %d %s", code, body)
	}
	host, _ := os.Hostname()
	var show struct {
		Row struct {
			Status, Assignee string
			HeldOn           string `json:"held_on"`
		}
	}
	d1.get("/tasks/SNAG-1", &show)
	if show.Row.Status != "claimed" || show.Row.Assignee != b.name || show.Row.HeldOn != host {
		t.Fatalf("clone 1 shows SNAG-1 %+v; want claimed by %s, held on %s", show.Row, b.name, host)
	}
	var list struct {
		Tasks []struct {
			Key, Status string
			HeldOn      string `json:"held_on"`
		}
	}
	d1.get("/tasks", &list)
	for _, tk := range list.Tasks {
		if tk.Key == "SNAG-1" && (tk.Status != "claimed" || tk.HeldOn != host) {
			t.Fatalf("clone 1 lists SNAG-1 %+v; want claimed, held on %s", tk, host)
		}
	}
	cmd := exec.Command(snagdBin, "snag", "list")
	cmd.Dir, cmd.Env = r1, append(os.Environ(), "SNAG_HOME="+home1, "SNAG_NO_AUTOSTART=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^SNAG-1 +claimed .*@`+b.name+` \[on `+regexp.QuoteMeta(host)+`\]`).Match(out) {
		t.Errorf("snag list in clone 1: %v\n%s\nwant SNAG-1 claimed by %s [on %s]", err, out, b.name, host)
	}
	if _, code, body := a.claim("SNAG-1"); code != http.StatusConflict {
		t.Fatalf("clone 1 claims the task clone 2 holds: %d %s, want 409", code, body)
	}
	if code, body, _ := b.call(http.MethodPost, "/tasks/SNAG-1/release", map[string]any{"epoch": c.Epoch, "reason": "giving it back"}); code != http.StatusOK {
		t.Fatalf("release on clone 2: %d %s", code, body)
	}
	eventually(t, "clone 1 to show SNAG-1 open once clone 2 released it", func() bool {
		show.Row.Status, show.Row.HeldOn = "", ""
		d1.get("/tasks/SNAG-1", &show)
		return show.Row.Status == "open" && show.Row.HeldOn == ""
	})
}
