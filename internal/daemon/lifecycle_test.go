package daemon_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/codec"
	snagd "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskgen"
)

// With SNAG_TEST_SLEEP set, the test binary is a process that does nothing
// until it is killed: a live pid for a session to be registered with.
func init() {
	if os.Getenv("SNAG_TEST_SLEEP") != "" {
		for {
			time.Sleep(time.Hour)
		}
	}
}

// startSleeper starts a process that lives until the test kills it, and
// returns it; the test's cleanup kills it too.
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SNAG_TEST_SLEEP=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return cmd
}

// killAndReap kills a sleeper and waits until its pid is gone from /proc,
// so a sweep that looks at it finds no process.
func killAndReap(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Process.Kill()
	eventually(t, "the killed process to be reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(cmd.Process.Pid))
		return errors.Is(err, os.ErrNotExist)
	})
}

// answer is one HTTP exchange as a client saw it.
type answer struct {
	Code   int
	Header http.Header
	Body   string
	Err    error
}

func (a answer) String() string {
	if a.Err != nil {
		return "error: " + a.Err.Error()
	}
	return strconv.Itoa(a.Code) + " " + strings.TrimSpace(a.Body)
}

// apiClient sends authorized requests to a snagd on 127.0.0.1:port. It never
// fails the test itself, so goroutines may use it; it is safe for
// concurrent use.
type apiClient struct {
	hc    *http.Client
	port  int
	token string
}

// newAPIClient returns a client for d whose connection pool keeps up to
// conns idle connections, so that concurrent callers are not slowed down
// by dialing. The token is read from d's SNAG_HOME, so the client works
// before d is ready.
func newAPIClient(t *testing.T, d *daemon, conns int) *apiClient {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(d.home, "token"))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &apiClient{hc: &http.Client{Transport: tr, Timeout: 2 * time.Minute}, port: d.port, token: strings.TrimSpace(string(tok))}
}

// send makes one request for a session (0: none, as a person would) with in
// as its JSON body (nil: none).
func (c *apiClient) send(session int64, method, path string, in any) answer {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return answer{Err: err}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", c.port, path), body)
	if err != nil {
		return answer{Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if session != 0 {
		req.Header.Set("X-Snag-Session", strconv.FormatInt(session, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{Code: resp.StatusCode, Header: resp.Header, Body: string(b), Err: err}
}

// claimAnswer is the JSON of a granted claim.
type claimAnswer struct {
	Task struct {
		ID, Key, Status, Assignee string
	}
	Epoch int64
}

// openSession registers a session the test acts for itself (no stream: only
// the sweep can end it) with the given fields of POST /sessions, and
// returns its id and name.
func openSession(t *testing.T, c *apiClient, fields map[string]any) (int64, string) {
	t.Helper()
	a := c.send(0, http.MethodPost, "/sessions", fields)
	var s struct {
		ID   int64
		Name string
	}
	if a.Code != http.StatusCreated || json.Unmarshal([]byte(a.Body), &s) != nil || s.ID == 0 {
		t.Fatalf("POST /sessions %v: %v", fields, a)
	}
	return s.ID, s.Name
}

// claimOK claims ref for a session and fails the test unless it is granted.
func claimOK(t *testing.T, c *apiClient, session int64, ref string) claimAnswer {
	t.Helper()
	// In team mode a snagd answers 503 starting until its first reconcile
	// with the store is done, as a client is told to retry: it is.
	var a answer
	eventually(t, "snagd to be done starting, for the claim of "+ref, func() bool {
		a = c.send(session, http.MethodPost, "/tasks/"+ref+"/claim", map[string]any{})
		return a.Code != http.StatusServiceUnavailable || !strings.Contains(a.Body, `"starting"`)
	})
	var out claimAnswer
	if a.Code != http.StatusOK || json.Unmarshal([]byte(a.Body), &out) != nil || out.Epoch == 0 {
		t.Fatalf("claim %s: %v", ref, a)
	}
	return out
}

// terminate stops a daemon with SIGTERM (an in-process one by ending its
// Run) and waits for it to exit.
func (d *daemon) terminate() {
	d.t.Helper()
	d.sigterm()
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.t.Fatalf("snagd did not stop on SIGTERM\n%s", d.log.String())
	}
}

// waitPortFile waits until a spawned daemon has written .snag/.port (it has
// bound its port and answers, though perhaps only with 503).
func (d *daemon) waitPortFile() {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			d.t.Fatalf("snagd exited: %v\n%s", d.err, d.log.String())
		default:
		}
		if _, err := os.Stat(filepath.Join(d.root, ".snag", ".port")); err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
	d.t.Fatalf("snagd wrote no .port in time\n%s", d.log.String())
}

// waitReadyLong waits for a spawned daemon's first rescan with a deadline
// long enough for a large project under -race on a busy machine, then
// does what waitReady does.
func (d *daemon) waitReadyLong() {
	d.t.Helper()
	d.waitPortFile()
	c := newAPIClient(d.t, d, 1)
	deadline := time.Now().Add(3 * time.Minute)
	for !c.isReady() {
		select {
		case <-d.done:
			d.t.Fatalf("snagd exited: %v\n%s", d.err, d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("snagd not ready in time\n%s", d.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.waitReady()
}

// isReady asks a daemon's /health whether its first rescan is done.
func (c *apiClient) isReady() bool {
	a := c.send(0, http.MethodGet, "/health", nil)
	var h struct{ Ready bool }
	return a.Code == http.StatusOK && json.Unmarshal([]byte(a.Body), &h) == nil && h.Ready
}

// setSessionColumn changes one column of a session's row in a project's
// snag.db behind the daemon's back, as the world changes behind it (a pid
// reused, a machine rebooted).
func setSessionColumn(t *testing.T, root string, id int64, column string, value any) {
	t.Helper()
	conn, err := sqlite.OpenConn(filepath.Join(root, ".snag", "snag.db"), sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetBusyTimeout(time.Minute)
	err = sqlitex.ExecuteTransient(conn, `UPDATE sessions SET `+column+` = :v WHERE id = :id`,
		&sqlitex.ExecOptions{Named: map[string]any{":v": value, ":id": id}})
	if err != nil {
		t.Fatal(err)
	}
	if conn.Changes() != 1 {
		t.Fatalf("session %d: no row changed", id)
	}
}

// scaled is how many rounds a test runs: full in a plain run, short under
// -short or in CI, and the number in the environment variable env when it
// is set (for a longer soak).
// scaled is a test's size: the short one unless SNAG_LONG is set (the test
// plan's full sizes, for a machine with time to spare), or env's value.
func scaled(t *testing.T, full, short int, env string) int {
	t.Helper()
	if s := os.Getenv(env); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive whole number", env, s)
		}
		return n
	}
	if os.Getenv("SNAG_LONG") == "" || testing.Short() {
		return short
	}
	return full
}

// TestL1_OneWinnerPerRound: 20 clients claim one task at the same instant,
// round after round: each round exactly one claim is granted, every other
// gets 409 naming the winner, and the winner's release opens the next
// round. Epochs only grow, and the file ends as it began.
// SNAG_L1_ROUNDS sets the number of rounds (1,000 for the plan's figure).
func TestL1_OneWinnerPerRound(t *testing.T) {
	t.Parallel()
	rounds := scaled(t, 200, 100, "SNAG_L1_ROUNDS")
	const clients = 20
	root := sampleProject(t)
	before, _ := os.ReadFile(filepath.Join(root, samplePath))
	d := startInProcess(t, root, "", snagd.Options{})
	c := newAPIClient(t, d, 2*clients)
	ids := make([]int64, clients)
	names := make([]string, clients)
	for i := range clients {
		ids[i], names[i] = openSession(t, c, map[string]any{"client": "l1", "pid": os.Getpid()})
	}
	var last int64
	start := time.Now()
	wins := make([]int, clients)
	for round := range rounds {
		var ready, done sync.WaitGroup
		gate := make(chan struct{})
		got := make([]answer, clients)
		for i := range clients {
			ready.Add(1)
			done.Go(func() {
				ready.Done()
				<-gate
				got[i] = c.send(ids[i], http.MethodPost, "/tasks/SNAG-11/claim", map[string]any{})
			})
		}
		ready.Wait()
		close(gate)
		done.Wait()
		winner := -1
		for i, a := range got {
			if a.Code != http.StatusOK {
				continue
			}
			if winner >= 0 {
				t.Fatalf("round %d: two winners, %s and %s:\n%s\n%s", round, names[winner], names[i], got[winner], a)
			}
			winner = i
		}
		if winner < 0 {
			t.Fatalf("round %d: no winner:\n%v", round, got)
		}
		wins[winner]++
		var won claimAnswer
		if err := json.Unmarshal([]byte(got[winner].Body), &won); err != nil || won.Task.Assignee != names[winner] {
			t.Fatalf("round %d: the winner's answer: %s", round, got[winner])
		}
		if won.Epoch <= last {
			t.Fatalf("round %d: epoch %d after %d; epochs only grow", round, won.Epoch, last)
		}
		last = won.Epoch
		for i, a := range got {
			if i == winner {
				continue
			}
			if a.Code != http.StatusConflict || !strings.Contains(a.Body, `"error":"held"`) || !strings.Contains(a.Body, names[winner]) {
				t.Fatalf("round %d: a loser got %s; want 409 held naming %s", round, a, names[winner])
			}
		}
		rel := c.send(ids[winner], http.MethodPost, "/tasks/SNAG-11/release", map[string]any{"epoch": won.Epoch, "reason": "round " + strconv.Itoa(round) + " is over"})
		if rel.Code != http.StatusOK {
			t.Fatalf("round %d: the winner's release: %s", round, rel)
		}
	}
	took := time.Since(start)
	t.Logf("%d rounds of %d simultaneous claims in %s (%s a round); wins by client: %v",
		rounds, clients, took.Round(time.Millisecond), (took / time.Duration(rounds)).Round(time.Microsecond), wins)
	if after, _ := os.ReadFile(filepath.Join(root, samplePath)); !bytes.Equal(before, after) {
		t.Errorf("after %d claims and releases the file differs from the original:\n%s", rounds, after)
	}
	if v := d.task("SNAG-11"); v.Row.Status != "open" || v.Row.Assignee != "" {
		t.Errorf("SNAG-11 at the end: %+v; want open and unassigned", v.Row)
	}
}

// sessionsView is GET /sessions.
type sessionsView struct {
	Sessions []sessionEntry `json:"sessions"`
	Leases   []leaseView    `json:"leases"`
}

// sessionEntry is one live session as GET /sessions shows it.
type sessionEntry struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	PID      int    `json:"pid"`
	PIDStart int64  `json:"pid_start"`
	BootID   string `json:"boot_id"`
	Host     string `json:"host"`
}

// TestL6_ReusedPIDIsDeadForeignIsNeverSwept: the sweep judges a session by
// its pid and that process's start time. A live pid with another start time
// is a reused pid: the agent is gone, and its lease is released. A session
// of another host, or of another boot, cannot be judged from here: it is
// never swept, only shown. A session whose live process is the one that
// registered keeps its lease, and one whose process died loses it.
func TestL6_ReusedPIDIsDeadForeignIsNeverSwept(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startInProcess(t, root, "", snagd.Options{})
	c := newAPIClient(t, d, 8)
	live, reused, rebooted, dying := startSleeper(t), startSleeper(t), startSleeper(t), startSleeper(t)
	gone := startSleeper(t)
	killAndReap(t, gone) // a pid with no process, for the remote session

	type session struct {
		what, ref string
		id        int64
		name      string
		swept     bool
	}
	sessions := []*session{
		{what: "live process, same start time", ref: "SNAG-11"},
		{what: "reused pid (live, another start time)", ref: "SNAG-12", swept: true},
		{what: "another host", ref: "SNAG-4"},
		{what: "another boot", ref: "SNAG-5"},
		{what: "process gone", ref: "SNAG-8", swept: true},
	}
	fields := []map[string]any{
		{"client": "l6", "pid": live.Process.Pid},
		{"client": "l6", "pid": reused.Process.Pid},
		{"client": "l6", "pid": gone.Process.Pid, "host": "build-box-7.example"},
		{"client": "l6", "pid": rebooted.Process.Pid},
		{"client": "l6", "pid": dying.Process.Pid},
	}
	for i, s := range sessions {
		s.id, s.name = openSession(t, c, fields[i])
		claimOK(t, c, s.id, s.ref)
	}
	var sv sessionsView
	d.get("/sessions", &sv)
	for _, s := range sv.Sessions {
		if s.ID == sessions[1].id {
			if s.PIDStart == 0 || s.BootID == "" {
				t.Fatalf("the local session was registered without a start time or boot id: %+v", s)
			}
			// The agent is gone and its pid now belongs to another process,
			// started at another time.
			setSessionColumn(t, root, s.ID, "pid_start", s.PIDStart+1)
		}
	}
	// The machine has rebooted since: the boot id differs, so the pid means
	// nothing here, whatever process has it now.
	setSessionColumn(t, root, sessions[3].id, "boot_id", "00000000-0000-4000-8000-000000000000")
	killAndReap(t, rebooted)
	killAndReap(t, dying)

	start := time.Now()
	for _, s := range sessions {
		if s.swept {
			eventually(t, s.ref+" released by the sweep ("+s.what+")", func() bool { return d.task(s.ref).Row.Status == "open" })
		}
	}
	t.Logf("the sweep released the reused pid's and the dead process's tasks %s after the change", time.Since(start).Round(time.Millisecond))
	d.waitProgress("two more sweeps", d.progress().Sweeps+2, sweeps)

	d.get("/sessions", &sv)
	shown := map[int64]bool{}
	for _, s := range sv.Sessions {
		shown[s.ID] = true
	}
	for _, s := range sessions {
		v := d.task(s.ref)
		switch {
		case s.swept && (shown[s.id] || v.Row.Status != "open"):
			t.Errorf("%s (%s): still shown %v, %s is %s; want the session ended and the task open", s.name, s.what, shown[s.id], s.ref, v.Row.Status)
		case !s.swept && (!shown[s.id] || v.Row.Status != "claimed" || v.Row.Assignee != s.name):
			t.Errorf("%s (%s): shown %v, %s is %s by %q; want it shown and still holding", s.name, s.what, shown[s.id], s.ref, v.Row.Status, v.Row.Assignee)
		}
	}
	for _, s := range sv.Sessions {
		if s.ID == sessions[2].id && s.Host != "build-box-7.example" {
			t.Errorf("the remote session is shown with host %q", s.Host)
		}
	}
	if !d.auditHas("release", "holder gone: process gone") {
		t.Error("no audit entry says the holder's process is gone")
	}
}

// TestL11_NoClaimOfABrokenOrMissingTask: a task whose file has conflict
// markers in its frontmatter, one whose file does not parse, one whose
// file has moved out of tasks/ while leased, and an id no file has are
// never claimed, neither by reference nor by claim-next; their files are
// left as they are. The moved task's lease survives its file's absence.
func TestL11_NoClaimOfABrokenOrMissingTask(t *testing.T) {
	t.Parallel()
	root := manyClaims(t, sampleProject(t))
	tasks := filepath.Join(root, ".snag", "tasks")
	d := startInProcess(t, root, "", snagd.Options{})
	c := newAPIClient(t, d, 4)
	holder, holderName := openSession(t, c, map[string]any{"client": "l11", "pid": os.Getpid()})
	other, _ := openSession(t, c, map[string]any{"client": "l11", "pid": os.Getpid()})

	edit := func(pattern, from, to string) string {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(tasks, pattern))
		if len(m) != 1 {
			t.Fatalf("%s: %d files", pattern, len(m))
		}
		raw, err := os.ReadFile(m[0])
		if err != nil {
			t.Fatal(err)
		}
		next := bytes.Replace(raw, []byte(from), []byte(to), 1)
		if bytes.Equal(raw, next) {
			t.Fatalf("%s has no %q", m[0], from)
		}
		if err := os.WriteFile(m[0], next, 0o644); err != nil {
			t.Fatal(err)
		}
		return m[0]
	}
	conflict := edit("SNAG-12 - *.md", "severity: low\n", "<<<<<<< HEAD\nseverity: low\n=======\nseverity: high\n>>>>>>> feature\n")
	invalid := edit("SNAG-4 - *.md", "status: open", "status: [open")
	fresh := filepath.Join(tasks, "SNAG-30 - Never parsed.md")
	if err := os.WriteFile(fresh, []byte("---\nid: tsk_01M7HWNJC2BQVB169BSXGERVZZ\nkey: SNAG-30\ntitle: [unclosed\n---\nbody\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the index to see the broken files", func() bool {
		var a, b struct{ Row struct{ State string } }
		return d.get("/tasks/SNAG-12", &a) == 200 && a.Row.State == "conflict" &&
			d.get("/tasks/SNAG-4", &b) == 200 && b.Row.State == "invalid"
	})
	snapshot := map[string][]byte{}
	for _, p := range []string{conflict, invalid, fresh} {
		snapshot[p], _ = os.ReadFile(p)
	}

	claimed := claimOK(t, c, holder, "SNAG-11")
	moved := filepath.Join(root, "SNAG-11 moved out.md")
	if err := os.Rename(filepath.Join(root, samplePath), moved); err != nil {
		t.Fatal(err)
	}
	eventually(t, "SNAG-11 missing in the index", func() bool {
		var v struct{ Row struct{ State string } }
		return d.get("/tasks/SNAG-11", &v) == 200 && v.Row.State == "missing"
	})

	refs := map[string]string{
		"SNAG-12": "conflict markers", "SNAG-4": "invalid", "SNAG-30": "never parsed",
		"SNAG-11": "moved out while leased", claimed.Task.ID: "moved out while leased, by id",
		"tsk_01M7HWNJC2BQVB169BSXGERVAA": "an id no file has",
	}
	for ref, what := range refs {
		for _, force := range []bool{false, true} {
			a := c.send(other, http.MethodPost, "/tasks/"+ref+"/claim", map[string]any{"force": force})
			if a.Code == http.StatusOK || a.Code >= 500 || a.Err != nil {
				t.Errorf("claim %s (%s, force %v): %s; want a refusal", ref, what, force, a)
			} else {
				t.Logf("claim %s (%s, force %v): %s", ref, what, force, a)
			}
		}
	}
	for {
		a := c.send(other, http.MethodPost, "/claim", map[string]any{})
		var out claimAnswer
		if a.Code != http.StatusOK || json.Unmarshal([]byte(a.Body), &out) != nil {
			t.Fatalf("claim next: %s", a)
		}
		if out.Task.Key == "" {
			break
		}
		if _, bad := refs[out.Task.Key]; bad {
			t.Errorf("claim next handed out %s (%s)", out.Task.Key, refs[out.Task.Key])
		}
	}
	for p, want := range snapshot {
		if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
			t.Errorf("a refused claim changed %s:\n%s", filepath.Base(p), got)
		}
	}
	if got, _ := os.ReadFile(moved); !bytes.Contains(got, []byte("assignee: "+holderName)) {
		t.Errorf("the moved file changed while out of tasks/:\n%s", got)
	}

	// The file comes back: it is still the holder's.
	if err := os.Rename(moved, filepath.Join(root, samplePath)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "SNAG-11 back in the index", func() bool {
		var v struct{ Row struct{ State string } }
		return d.get("/tasks/SNAG-11", &v) == 200 && v.Row.State == "ok"
	})
	if a := c.send(other, http.MethodPost, "/tasks/SNAG-11/claim", map[string]any{}); a.Code != http.StatusConflict || !strings.Contains(a.Body, holderName) {
		t.Errorf("claim of SNAG-11 back in tasks/: %s; want 409 naming %s", a, holderName)
	}
	if a := c.send(holder, http.MethodPost, "/tasks/SNAG-11/release", map[string]any{"epoch": claimed.Epoch, "reason": "done looking"}); a.Code != http.StatusOK {
		t.Errorf("the holder's release after the file came back: %s", a)
	}
}

// firing claims refs over and over, for one session, from a few goroutines,
// from the moment a daemon's port file appears until its first rescan is
// done and a few answers more: it records every answer per ref, and the
// answers that came before /health said ready.
type firing struct {
	mu      sync.Mutex
	answers map[string][]answer
	early   int // answers seen before /health said ready
}

// fireClaims runs a firing against d until it is ready and for a little
// after, and returns what it saw.
func fireClaims(t *testing.T, d *daemon, c *apiClient, session int64, refs []string) *firing {
	t.Helper()
	d.waitPortFile()
	f := &firing{answers: map[string][]answer{}}
	var ready atomic.Bool
	var readyAt atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				ref := refs[(i+n)%len(refs)]
				a := c.send(session, http.MethodPost, "/tasks/"+ref+"/claim", map[string]any{})
				f.mu.Lock()
				f.answers[ref] = append(f.answers[ref], a)
				if !ready.Load() {
					f.early++
				}
				f.mu.Unlock()
				if at := readyAt.Load(); at != 0 && time.Since(time.Unix(0, at)) > 200*time.Millisecond {
					return
				}
				time.Sleep(2 * time.Millisecond) // leave the daemon some of the machine for its rescan
			}
		})
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !c.isReady() {
		if time.Now().After(deadline) {
			t.Fatalf("snagd not ready in time\n%s", d.log.String())
		}
		time.Sleep(time.Millisecond)
	}
	ready.Store(true)
	readyAt.Store(time.Now().UnixNano())
	wg.Wait()
	d.waitReady() // for d.token and d.port
	return f
}

// check fails the test for any answer to a claim of ref that is not 503
// with Retry-After and is not allowed by ok, and returns how many answers
// were 503.
func (f *firing) check(t *testing.T, ref string, ok func(a answer) bool) (unavailable int) {
	t.Helper()
	for _, a := range f.answers[ref] {
		switch {
		case a.Err != nil:
			t.Errorf("claim %s: %v", ref, a.Err)
		case a.Code == http.StatusServiceUnavailable:
			unavailable++
			if a.Header.Get("Retry-After") == "" || !strings.Contains(a.Body, `"error":"starting"`) {
				t.Errorf("claim %s before ready: %s, Retry-After %q; want 503 starting with Retry-After", ref, a, a.Header.Get("Retry-After"))
			}
		case !ok(a):
			t.Errorf("claim %s: %s", ref, a)
		}
	}
	return unavailable
}

// TestL11_NoClaimBeforeTheFirstRescan: snagd restarts on 5,000 task files
// (2,000 under -short or in CI; SNAG_L11_FILES sets it). While it was down a
// person cancelled one open task and marked another claimed by DANA. From
// the moment its port file appears, a session of its previous run claims
// both: until the first rescan is done every answer is 503 with
// Retry-After; after it, both are refused for what the files now say. No
// answer is ever a grant; a task left open is claimable once ready.
func TestL11_NoClaimBeforeTheFirstRescan(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	tasks := filepath.Join(root, ".snag", "tasks")
	if err := taskgen.Write(tasks, scaled(t, 5000, 2000, "SNAG_L11_FILES"), 11); err != nil {
		t.Fatal(err)
	}
	d := spawnInProcess(t, root, "", snagd.Options{})
	d.waitReadyLong()
	c := newAPIClient(t, d, 8)
	session, _ := openSession(t, c, map[string]any{"client": "l11", "pid": os.Getpid()})
	var open struct {
		Tasks []struct{ Key, Path string }
	}
	if code := d.get("/tasks?status=open&limit=3", &open); code != 200 || len(open.Tasks) < 3 {
		t.Fatalf("open tasks: %d %+v", code, open)
	}
	d.terminate()

	// While snagd is down a person cancels the first and edits the second's
	// status to claimed by someone else; the third is left open.
	var refs []string
	for i, tk := range open.Tasks {
		refs = append(refs, tk.Key)
		p := filepath.Join(root, ".snag", tk.Path)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var next []byte
		switch i {
		case 0:
			next, err = codec.Edit(raw, codec.Set("status", "cancelled"))
		case 1:
			next, err = codec.Edit(raw, codec.Set("status", "claimed"), codec.Set("assignee", "DANA"))
		default:
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, next, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	d2 := spawnInProcess(t, root, d.home, snagd.Options{})
	start := time.Now()
	f := fireClaims(t, d2, newAPIClient(t, d2, 8), session, refs[:2])
	t.Logf("ready %s after start; %d answers before ready", time.Since(start).Round(time.Millisecond), f.early)
	n := f.check(t, refs[0], func(a answer) bool { return a.Code == http.StatusConflict && strings.Contains(a.Body, "cancelled") })
	n += f.check(t, refs[1], func(a answer) bool { return a.Code == http.StatusConflict && strings.Contains(a.Body, "DANA") })
	if n == 0 {
		t.Errorf("no claim was answered before the first rescan was done: the test saw nothing of the start")
	}
	t.Logf("%d answers were 503 before ready; %d in all", n, len(f.answers[refs[0]])+len(f.answers[refs[1]]))
	c2 := newAPIClient(t, d2, 2)
	fresh, _ := openSession(t, c2, map[string]any{"client": "l11", "pid": os.Getpid()})
	claimOK(t, c2, fresh, refs[2])
}

// taskFacts is what the index must say of a task file.
type taskFacts struct{ ID, Status, Title string }

// tasksOnDisk parses every task file of a project.
func tasksOnDisk(t *testing.T, root string) map[string]taskFacts {
	t.Helper()
	dir := filepath.Join(root, ".snag", "tasks")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]taskFacts{}
	for _, e := range ents {
		if !queue.IsTaskFileName(e.Name()) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		tk, err := codec.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[tk.Key] = taskFacts{tk.ID, string(tk.Status), tk.Title}
	}
	return out
}

// tasksIndexed lists every task the daemon's index holds.
func tasksIndexed(t *testing.T, d *daemon) map[string]taskFacts {
	t.Helper()
	out := map[string]taskFacts{}
	cursor := ""
	for {
		var page struct {
			Tasks []struct{ ID, Key, Status, Title string }
			Next  string
		}
		q := "/tasks?all=true&limit=10000"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		if code := d.get(q, &page); code != http.StatusOK {
			t.Fatalf("GET %s: %d", q, code)
		}
		for _, r := range page.Tasks {
			out[r.Key] = taskFacts{r.ID, r.Status, r.Title}
		}
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// TestS4_ChangesWhileDownAreSeenBeforeTheFirstClaim: while snagd is down, a
// branch switch (real git) deletes, adds and edits tasks, and a person
// deletes, adds and edits more in the working tree. From the moment the new
// snagd binds its port, claims come in: until the start-up rescan is done
// they get 503; after it no deleted task is ever granted and no added one
// is unknown. The index then matches the files exactly; a task deleted
// while down is not claimable, one added while down is.
func TestS4_ChangesWhileDownAreSeenBeforeTheFirstClaim(t *testing.T) {
	t.Parallel()
	needGit(t)
	root := sampleProject(t)
	tasks := filepath.Join(root, ".snag", "tasks")
	git(t, root, "init", "-q")
	git(t, root, "add", ".")
	git(t, root, "commit", "-q", "-m", "tasks")
	git(t, root, "checkout", "-q", "-b", "feature")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	one := func(pattern string) string {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(tasks, pattern))
		if len(m) != 1 {
			t.Fatalf("%s: %d files", pattern, len(m))
		}
		return m[0]
	}
	retitle := func(pattern, title string, more ...codec.Field) {
		t.Helper()
		p := one(pattern)
		raw, err := os.ReadFile(p)
		must(err)
		next, err := codec.Edit(raw, append([]codec.Field{codec.Set("title", title)}, more...)...)
		must(err)
		must(os.WriteFile(p, next, 0o644))
	}
	add := func(n int, title string) {
		t.Helper()
		tk := &queue.Task{ID: queue.NewID(time.Now()), Key: queue.Alias(n), Title: title, Status: queue.StatusOpen,
			Trust: queue.TrustVetted, Severity: queue.SeverityMedium, Kind: queue.KindBug, Wave: 1}
		must(os.WriteFile(filepath.Join(tasks, queue.FileName(tk.Key, tk.Title)), codec.Format(tk), 0o644))
	}
	// The feature branch: SNAG-14 deleted, SNAG-21 added, SNAG-12 retitled
	// and cancelled.
	must(os.Remove(one("SNAG-14 - *.md")))
	add(21, "Added on the feature branch")
	retitle("SNAG-12 - *.md", "Gallery retitled on the feature branch", codec.Set("status", "cancelled"))
	git(t, root, "add", "-A", ".")
	git(t, root, "commit", "-q", "-m", "feature")
	git(t, root, "checkout", "-q", "main")

	d := startDaemon(t, root, "")
	c := newAPIClient(t, d, 8)
	session, _ := openSession(t, c, map[string]any{"client": "s4", "pid": os.Getpid()})
	for _, ref := range []string{"SNAG-14", "SNAG-2", "SNAG-1", "SNAG-12"} {
		d.task(ref) // indexed before snagd goes down
	}
	for _, ref := range []string{"SNAG-21", "SNAG-22"} {
		if code := d.get("/tasks/"+ref, nil); code != http.StatusNotFound {
			t.Fatalf("GET /tasks/%s before: %d; want 404", ref, code)
		}
	}
	d.terminate()

	git(t, root, "checkout", "-q", "feature")
	must(os.Remove(one("SNAG-2 - *.md")))
	add(22, "Added by hand while snagd was down")
	retitle("SNAG-1 - *.md", "Checkout button retitled by hand")

	d2 := spawn(t, root, d.home)
	start := time.Now()
	f := fireClaims(t, d2, newAPIClient(t, d2, 8), session, []string{"SNAG-14", "SNAG-2", "SNAG-21"})
	t.Logf("ready %s after start; %d answers before ready", time.Since(start).Round(time.Millisecond), f.early)
	deleted := func(a answer) bool { return a.Code == http.StatusNotFound }
	n := f.check(t, "SNAG-14", deleted) + f.check(t, "SNAG-2", deleted)
	// The session's repeated claims of the task it won get its lease back:
	// one grant is one epoch.
	grants := map[int64]bool{}
	n += f.check(t, "SNAG-21", func(a answer) bool {
		if a.Code == http.StatusOK {
			var out struct{ Epoch int64 }
			json.Unmarshal([]byte(a.Body), &out)
			grants[out.Epoch] = true
		}
		return a.Code == http.StatusOK || a.Code == http.StatusConflict && strings.Contains(a.Body, `"error":"held"`)
	})
	if len(grants) != 1 {
		t.Errorf("SNAG-21, added while down, was granted %d times (epochs %v); want once", len(grants), grants)
	}
	if n == 0 {
		t.Errorf("no claim was answered before the start-up rescan was done: the test saw nothing of the start")
	}

	// The session of the first run holds no stream: it ends after the
	// grace, giving back what it won. Compare once that is over.
	eventually(t, "the first run's session to end", func() bool {
		var sv sessionsView
		d2.get("/sessions", &sv)
		return !slices.ContainsFunc(sv.Sessions, func(s sessionEntry) bool { return s.ID == session })
	})
	// Releasing what the session held rewrites files; the watcher sees
	// those writes a moment later: compare once files and index are still.
	var diff string
	for range 100 {
		if diff = cmp.Diff(tasksOnDisk(t, root), tasksIndexed(t, d2)); diff == "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if diff != "" {
		t.Errorf("the index after the start-up rescan differs from the files (-files +index):\n%s", diff)
	}
	c2 := newAPIClient(t, d2, 2)
	fresh, _ := openSession(t, c2, map[string]any{"client": "s4", "pid": os.Getpid()})
	if a := c2.send(fresh, http.MethodPost, "/tasks/SNAG-2/claim", map[string]any{}); a.Code != http.StatusNotFound {
		t.Errorf("claim of SNAG-2, deleted while down: %s; want 404", a)
	}
	claimOK(t, c2, fresh, "SNAG-22")
	if a := c2.send(fresh, http.MethodPost, "/tasks/SNAG-12/claim", map[string]any{}); a.Code != http.StatusConflict {
		t.Errorf("claim of SNAG-12, cancelled on the branch: %s; want 409", a)
	}
	if diff := cmp.Diff(tasksOnDisk(t, root), tasksIndexed(t, d2)); diff != "" {
		t.Errorf("the index after the claims differs from the files (-files +index):\n%s", diff)
	}
}

// TestS7_PersonsLinesSurviveStatusFlips: a person appends unique lines to
// a task's body at random moments, saving the whole file as an editor
// would (mostly temp file and rename, sometimes in place), while two agent
// processes claim and release the same task over and over. Every line the
// person added is in the file once snagd has stopped, and the file parses.
// SNAG_S7_FLIPS sets the number of status changes.
func TestS7_PersonsLinesSurviveStatusFlips(t *testing.T) {
	t.Parallel()
	flips := scaled(t, 1000, 200, "SNAG_S7_FLIPS")
	root := sampleProject(t)
	p := filepath.Join(root, samplePath)
	d := startDaemon(t, root, "")
	agents := []*agent{startAgent(t, d, ""), startAgent(t, d, "")}

	stop := make(chan struct{})
	type added struct {
		line    string
		inPlace bool
		at      time.Time
	}
	var lines []added
	person := make(chan error, 1)
	go func() {
		r := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
		tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".person-tmp")
		for i := 0; ; i++ {
			select {
			case <-stop:
				person <- nil
				return
			case <-time.After(time.Duration(r.IntN(30000)) * time.Microsecond):
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				person <- err
				return
			}
			if len(raw) > 0 && raw[len(raw)-1] != '\n' {
				raw = append(raw, '\n')
			}
			line := fmt.Sprintf("person line %d %08x", i, r.Uint32())
			next := append(raw, line+"\n"...)
			inPlace := r.IntN(4) == 0
			if inPlace {
				err = os.WriteFile(p, next, 0o644)
			} else if err = os.WriteFile(tmp, next, 0o644); err == nil {
				err = os.Rename(tmp, p)
			}
			if err != nil {
				person <- err
				return
			}
			lines = append(lines, added{line, inPlace, time.Now()})
		}
	}()

	var changes atomic.Int64
	var mu sync.Mutex
	refusals := map[string]int{}
	var lastRefusal, internal string
	refuse := func(ans string) {
		kind := ans
		if i := strings.Index(ans, `"error":"`); i >= 0 {
			kind, _, _ = strings.Cut(ans[i+9:], `"`)
		}
		mu.Lock()
		refusals[kind]++
		lastRefusal = ans
		if kind == "internal" {
			internal = ans
		}
		mu.Unlock()
	}
	c := newAPIClient(t, d, 4)
	var v struct{ Row struct{ ID string } }
	if code := d.get("/tasks/SNAG-11", &v); code != http.StatusOK {
		t.Fatalf("GET /tasks/SNAG-11: %d", code)
	}
	id := v.Row.ID
	var forced atomic.Int64
	detached := func() bool {
		a := c.send(0, http.MethodGet, "/sessions", nil)
		var sv sessionsView
		json.Unmarshal([]byte(a.Body), &sv)
		return slices.ContainsFunc(sv.Leases, func(l leaseView) bool { return l.TaskID == id && l.Detached })
	}
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() {
			for changes.Load() < int64(flips) && time.Now().Before(deadline) {
				ans := a.do("claim SNAG-11")
				var out claimAnswer
				if !strings.HasPrefix(ans, "ok ") || json.Unmarshal([]byte(ans[3:]), &out) != nil || out.Epoch == 0 {
					refuse(ans)
					if strings.Contains(ans, `"error":"held"`) && detached() {
						// A save from the person's stale buffer brought back
						// "claimed by X" after X released: the file wins, and
						// the lease is detached. The person takes it back.
						if r := c.send(0, http.MethodPost, "/tasks/SNAG-11/release", map[string]any{"by": "person", "reason": "stale buffer"}); r.Code == http.StatusOK {
							forced.Add(1)
						}
					}
					continue
				}
				changes.Add(1)
				// Release until it is done, or until the lease is gone: a
				// person's save that undid the claim ends it (stale).
				for time.Now().Before(deadline) {
					ans = a.do(fmt.Sprintf("release SNAG-11 %d flip", out.Epoch))
					if strings.HasPrefix(ans, "ok ") {
						changes.Add(1)
						break
					}
					refuse(ans)
					if strings.Contains(ans, `"error":"stale"`) {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-person; err != nil {
		t.Fatalf("the person's save failed: %v", err)
	}
	if n := changes.Load(); n < int64(flips) && n >= int64(flips)/5 {
		t.Logf("the deadline came after %d of %d status changes (a busy machine): the lines are checked all the same", n, flips)
	} else if n < int64(flips) {
		raw, _ := os.ReadFile(p)
		t.Fatalf("only %d status changes in %s; refusals by kind: %v; last refusal: %s\nthe file:\n%s",
			changes.Load(), time.Since(start).Round(time.Second), refusals, lastRefusal, raw)
	}
	t.Logf("%d status changes and %d person's saves in %s; refusals by kind: %v; detached leases a person released: %d",
		changes.Load(), len(lines), time.Since(start).Round(time.Millisecond), refusals, forced.Load())

	if internal != "" {
		t.Errorf("%d refusals were snagd's own failure; the last: %s", refusals["internal"], internal)
	}
	// A save that landed in a file snagd had just swapped out is merged
	// back once nothing writes into it; a stop settles every such file.
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(2 * time.Minute):
		// A stop that never ends is a bug to see, not a test to time out:
		// SIGQUIT makes snagd print every goroutine into its log.
		d.cmd.Process.Signal(syscall.SIGQUIT)
		<-d.done
		t.Fatalf("snagd did not stop within 2 minutes of SIGTERM; its log, with its goroutines:\n%s", d.log.String())
	}
	final, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := codec.Parse(final); err != nil {
		t.Errorf("the file does not parse at the end: %v\n%s", err, final)
	}
	lost := 0
	for _, l := range lines {
		if !bytes.Contains(final, []byte(l.line+"\n")) {
			lost++
			if lost <= 10 {
				t.Errorf("lost the person's line %q (saved in place %v at %s)", l.line, l.inPlace, l.at.Format("15:04:05.000000"))
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d lines the person added are not in the file", lost, len(lines))
		kept, _ := filepath.Glob(filepath.Join(root, ".snag", "recovered", "*"))
		t.Logf("files kept in .snag/recovered/: %q", kept)
		for _, l := range strings.Split(d.log.String(), "\n") {
			if strings.Contains(l, "save in place") || strings.Contains(l, "level=ERROR") {
				t.Logf("snagd: %s", l)
			}
		}
	}
}
