package daemon_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/codec"
	daemonpkg "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

var p5Crashes = flag.Int("p5-crashes", 0, "crashes TestP5_FailpointCrashes makes (default 20, 5 with -short); 1000 for the full run")

// crSpawn starts snagd on root like spawn, with more environment (a
// failpoint), and waits until it is ready.
func crSpawn(t *testing.T, root, home string, env ...string) *daemon {
	t.Helper()
	d := spawnEnv(t, root, home, env, "--log", "debug")
	d.waitReady()
	return d
}

// crKilled waits for snagd to die of SIGKILL (a failpoint's), failing the
// test when it does not.
func crKilled(t *testing.T, d *daemon, what string) {
	t.Helper()
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: snagd did not die: the failpoint did not fire", what)
	}
	var ee *exec.ExitError
	if !errors.As(d.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s: snagd ended with %v, not SIGKILL\n%s", what, d.err, d.log.String())
	}
	if !strings.Contains(d.log.String(), "failpoint") {
		t.Fatalf("%s: snagd was killed, but not by its failpoint\n%s", what, d.log.String())
	}
}

// crFile is a task file as read from disk, without snagd.
type crFile struct {
	ID, Key, Status, Assignee string
}

// crFiles reads every task file of root and fails the test when one is
// not whole (does not parse: empty, partial) or a temp file is left in
// .snag/ or .snag/tasks/. A running snagd keeps the file a rewrite
// displaced for a moment, until it has looked at it again, so temp files
// are given the generous deadline to go before they count as left.
func crFiles(t *testing.T, root string) map[string]crFile {
	t.Helper()
	out := map[string]crFile{}
	for _, dir := range []string{filepath.Join(root, ".snag"), filepath.Join(root, ".snag", "tasks")} {
		var ents []os.DirEntry
		deadline := time.Now().Add(30 * time.Second)
		for {
			var err error
			if ents, err = os.ReadDir(dir); err != nil {
				t.Fatal(err)
			}
			temps := slices.ContainsFunc(ents, func(e os.DirEntry) bool { return strings.HasSuffix(e.Name(), taskfs.TempSuffix) })
			if !temps || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), taskfs.TempSuffix) {
				t.Errorf("temp file left in %s: %s", dir, e.Name())
			}
			if filepath.Base(dir) != "tasks" || !strings.HasSuffix(e.Name(), ".md") {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			tk, err := codec.Parse(raw)
			if err != nil {
				t.Errorf("%s is not whole (%d bytes): %v", e.Name(), len(raw), err)
				continue
			}
			out[tk.Key] = crFile{ID: tk.ID, Key: tk.Key, Status: string(tk.Status), Assignee: tk.Assignee}
		}
	}
	return out
}

type crRow struct {
	ID, Key, Status, Assignee, State string
}

// crRows lists every task through the API.
func crRows(t *testing.T, d *daemon) map[string]crRow {
	t.Helper()
	out := map[string]crRow{}
	cursor := ""
	for {
		var page struct {
			Tasks []crRow
			Next  string
		}
		if code := d.get("/tasks?all=true&limit=1000&cursor="+cursor, &page); code != 200 {
			t.Fatalf("GET /tasks: %d", code)
		}
		for _, r := range page.Tasks {
			out[r.Key] = r
		}
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// crCheck checks the invariants crash tests care about on a restarted
// snagd: every file whole and no temp file left; the index holds exactly
// the files' tasks with the files' status and assignee; a task is leased
// exactly when its file says claimed or verifying, by its assignee. It
// returns the files and the live leases by task id.
func crCheck(t *testing.T, d *daemon) (map[string]crFile, map[string]leaseView) {
	t.Helper()
	files := crFiles(t, d.root)
	rows := crRows(t, d)
	for k, f := range files {
		r, ok := rows[k]
		if !ok {
			t.Errorf("%s is in the files, not in the index", k)
			continue
		}
		if r.ID != f.ID || r.Status != f.Status || r.Assignee != f.Assignee || r.State != "ok" {
			t.Errorf("%s: index %+v; file %+v", k, r, f)
		}
	}
	for k := range rows {
		if _, ok := files[k]; !ok {
			t.Errorf("%s is in the index, not in the files", k)
		}
	}
	leases := map[string]leaseView{}
	for _, l := range d.leases() {
		if _, dup := leases[l.TaskID]; dup {
			t.Errorf("task %s has two live leases", l.TaskID)
		}
		leases[l.TaskID] = l
	}
	byID := map[string]crFile{}
	for _, f := range files {
		byID[f.ID] = f
	}
	for id, l := range leases {
		f, ok := byID[id]
		if !ok {
			continue // a lease of a task whose file is gone is kept
		}
		if f.Status != "claimed" && f.Status != "verifying" {
			t.Errorf("%s is %s in its file but leased to %s", f.Key, f.Status, l.Holder)
		} else if l.Holder != f.Assignee {
			t.Errorf("%s: leased to %s, the file's assignee is %s", f.Key, l.Holder, f.Assignee)
		}
	}
	for _, f := range files {
		if _, ok := leases[f.ID]; !ok && (f.Status == "claimed" || f.Status == "verifying") {
			t.Errorf("%s is %s by %s in its file, with no lease", f.Key, f.Status, f.Assignee)
		}
	}
	return files, leases
}

// personPost sends a person's write and returns the status, or 0 when the
// connection broke (snagd died on the way).
func personPost(d *daemon, path string, in any) int {
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, d.url(path), bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestS1_ClaimFailpoints: snagd dies at each step of a claim; after a
// restart every file is whole, no temp file is left, the index agrees with
// the files, and the task is wholly claimed or wholly open. Before the
// rename it is open; from the rename on the file says claimed and wins: a
// claim whose transaction did not commit (it was never acknowledged) is
// re-derived from the file, and since its agent is still connected the
// lease goes back to the agent's session rather than staying detached; one
// that committed is the agent's own lease.
func TestS1_ClaimFailpoints(t *testing.T) {
	t.Parallel()
	cases := []struct {
		step     string
		claimed  bool
		detached bool
	}{
		{"begun", false, false},
		{"temp-created", false, false},
		{"temp-written", false, false},
		{"temp-synced", false, false},
		{"renamed", true, true},
		{"dir-synced", true, true},
		{"committing", true, true},
		{"committed", true, false},
	}
	for _, c := range cases {
		t.Run(c.step, func(t *testing.T) {
			t.Parallel()
			root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
			d := crSpawn(t, root, home, daemonpkg.FailpointEnv+"=claim:"+c.step)
			a := startAgent(t, d, "")
			if ans := a.do("claim SNAG-11"); strings.HasPrefix(ans, "ok ") {
				t.Fatalf("the claim was acknowledged though snagd died: %s", ans)
			}
			crKilled(t, d, "claim:"+c.step)
			d2 := startDaemon(t, root, home)
			files, leases := crCheck(t, d2)
			f := files["SNAG-11"]
			l, leased := leases[f.ID]
			switch {
			case !c.claimed && (f.Status != "open" || leased):
				t.Errorf("SNAG-11 is %s (lease %v); want open, no lease", f.Status, leased)
			case c.claimed && (f.Status != "claimed" || f.Assignee != a.Name || !leased || l.Holder != a.Name):
				t.Errorf("SNAG-11 is %s by %q (lease %+v); want claimed by %s", f.Status, f.Assignee, l, a.Name)
			case c.claimed && l.Detached:
				t.Errorf("SNAG-11's lease is detached though its agent %s is connected (re-derived: %v)", a.Name, c.detached)
			}
			if kept, _ := filepath.Glob(filepath.Join(root, ".snag", "recovered", "*")); len(kept) > 0 {
				t.Errorf("files kept in .snag/recovered/ though no person saved: %q", kept)
			}
			a.claim("SNAG-11") // the agent goes on working with the restarted snagd
		})
	}
}

// slowVerify gives a project an approved verify command that outlasts the
// test, so a resolved task stays verifying, with its lease, while the test
// looks at it.
func slowVerify(t *testing.T, root, home string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, ".snag", "config.json"), []byte(`{"version": 1, "verify": {"command": "sleep 600"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	approve(t, root, home, "sleep 600", false)
}

// TestS1_ResolveFailpoints: the same for a resolve: claimed before the
// rename, verifying after it; the lease is the agent's throughout.
func TestS1_ResolveFailpoints(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		step      string
		verifying bool
	}{
		{"begun", false}, {"temp-created", false}, {"temp-written", false}, {"temp-synced", false},
		{"renamed", true}, {"dir-synced", true}, {"committing", true}, {"committed", true},
	} {
		t.Run(c.step, func(t *testing.T) {
			t.Parallel()
			root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
			slowVerify(t, root, home)
			d := crSpawn(t, root, home, daemonpkg.FailpointEnv+"=resolve:"+c.step)
			a := startAgent(t, d, "")
			_, epoch := a.claim("SNAG-11")
			if ans := a.do(fmt.Sprintf("resolve SNAG-11 %d", epoch)); strings.HasPrefix(ans, "ok ") {
				t.Fatalf("the resolve was acknowledged though snagd died: %s", ans)
			}
			crKilled(t, d, "resolve:"+c.step)
			d2 := startDaemon(t, root, home)
			files, leases := crCheck(t, d2)
			f := files["SNAG-11"]
			want := "claimed"
			if c.verifying {
				want = "verifying"
			}
			if l := leases[f.ID]; f.Status != want || l.Holder != a.Name || l.Detached || l.Epoch != epoch {
				t.Fatalf("SNAG-11 is %s, lease %+v; want %s, the agent's lease of epoch %d", f.Status, l, want, epoch)
			}
			if !c.verifying { // the acknowledged claim survived: the resolve can be made again
				if ans := a.do(fmt.Sprintf("resolve SNAG-11 %d", epoch)); !strings.Contains(ans, `"verifying"`) {
					t.Errorf("resolve again after the restart: %s", ans)
				}
			}
		})
	}
}

// TestS1_AddFailpoints: snagd dies at each step of a person's add. Before
// the new file is linked into place there is no new task; from then on it
// is whole and indexed. The next add works.
func TestS1_AddFailpoints(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		point string
		added bool
	}{
		{"begun@1", false}, {"committed@1", false}, // the alias number's reservation
		{"temp-created", false}, {"temp-written", false}, {"temp-synced", false},
		{"linked", true}, {"temp-removed", true}, {"dir-synced", true},
		{"begun@2", true}, {"committed@2", true}, // the new file's row
	} {
		t.Run(c.point, func(t *testing.T) {
			t.Parallel()
			root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
			d := crSpawn(t, root, home, daemonpkg.FailpointEnv+"=add:"+c.point)
			before := crFiles(t, root)
			if code := personPost(d, "/tasks", map[string]any{"title": "Crash in the middle of an add", "by": "dana"}); code != 0 {
				t.Fatalf("add answered %d though snagd died", code)
			}
			crKilled(t, d, "add:"+c.point)
			d2 := startDaemon(t, root, home)
			files, _ := crCheck(t, d2)
			if got := len(files) - len(before); got != map[bool]int{false: 0, true: 1}[c.added] {
				t.Fatalf("%d new tasks; want added=%v", got, c.added)
			}
			if code := personPost(d2, "/tasks", map[string]any{"title": "The add after the crash", "by": "dana"}); code != 201 {
				t.Fatalf("add after the restart: %d", code)
			}
			after, _ := crCheck(t, d2)
			keys := map[string]bool{}
			for k := range after {
				keys[k] = true
			}
			if len(keys) != len(files)+1 {
				t.Errorf("%d tasks after one more add to %d", len(keys), len(files))
			}
		})
	}
}

// p5Op is one thing an agent asks of snagd in TestP5.
type p5Op struct {
	agent  int
	key    string
	action string // claim, resolve, release
}

// p5State is what a task's file says: its status, and its assignee when
// held.
type p5State struct{ status, assignee string }

// TestP5_FailpointCrashes: agents claim, release and resolve tasks while
// snagd dies at a random failpoint of a random operation (a plain SIGKILL
// when the failpoint does not come up). After each restart every
// acknowledged claim, release and resolve is there; an operation in flight
// at the crash is wholly done or not at all; and crCheck's invariants hold.
// Each agent works its own share of the tasks, so a task's expected state
// is known exactly. The number of crashes is 20, 5 with -short, and
// -p5-crashes=1000 makes the full run; figures are logged.
func TestP5_FailpointCrashes(t *testing.T) {
	t.Parallel()
	crashes := 20
	if testing.Short() {
		crashes = 5
	}
	if *p5Crashes > 0 {
		crashes = *p5Crashes
	}
	const agents = 4
	ntasks := 100 + 2*crashes
	root := t.TempDir()
	tasks := filepath.Join(root, ".snag", "tasks")
	os.MkdirAll(tasks, 0o755)
	for i := 1; i <= ntasks; i++ {
		tk := &queue.Task{ID: queue.NewID(time.Now()), Key: queue.Alias(i), Title: fmt.Sprintf("Task %d", i),
			Status: queue.StatusOpen, Trust: queue.TrustVetted, Severity: queue.SeverityMedium, Kind: queue.KindBug, Wave: 1}
		os.WriteFile(filepath.Join(tasks, queue.FileName(tk.Key, tk.Title)), codec.Format(tk), 0o644)
	}
	home := filepath.Join(t.TempDir(), "home")
	slowVerify(t, root, home)
	manyClaims(t, root) // each agent holds up to three tasks at once
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	steps := []string{"begun", "temp-created", "temp-written", "temp-synced", "renamed", "dir-synced", "committing", "committed"}
	ops := []string{"claim", "claim", "release", "resolve"}

	start := time.Now()
	d := crSpawn(t, root, home)
	var ags []*agent
	for range agents {
		ags = append(ags, startAgent(t, d, ""))
	}
	want := map[string]p5State{} // after every acknowledged operation
	for i := 1; i <= ntasks; i++ {
		want[queue.Alias(i)] = p5State{status: "open"}
	}
	epochs := map[string]int64{}
	var fired, plain, acked int
	byStep := map[string]int{}
	var restart []time.Duration
	for round := 0; round < crashes; round++ {
		spec := fmt.Sprintf("%s:%s@%d", ops[rng.IntN(len(ops))], steps[rng.IntN(len(steps))], 1+rng.IntN(6))
		d.cmd.Process.Signal(syscall.SIGTERM) // the round's snagd starts with its failpoint
		<-d.done
		began := time.Now()
		d = crSpawn(t, root, home, daemonpkg.FailpointEnv+"="+spec)
		restart = append(restart, time.Since(began))

		var mu sync.Mutex
		inflight := map[string]p5Op{}
		var wg sync.WaitGroup
		for ai, a := range ags {
			wg.Add(1)
			seed := rng.Uint64()
			go func() {
				defer wg.Done()
				arng := rand.New(rand.NewPCG(seed, uint64(ai)))
				for n := 0; n < 40; n++ {
					mu.Lock()
					var held, free []string
					for k, s := range want {
						num, _ := strconv.Atoi(strings.TrimPrefix(k, "SNAG-"))
						if num%agents != ai {
							continue
						}
						switch {
						case s.status == "claimed" && s.assignee == a.Name:
							held = append(held, k)
						case s.status == "open":
							free = append(free, k)
						}
					}
					sort.Strings(held)
					sort.Strings(free)
					var op p5Op
					switch {
					case len(held) > 0 && (len(held) >= 3 || arng.IntN(10) < 6 || len(free) == 0):
						op = p5Op{ai, held[arng.IntN(len(held))], "release"}
						if arng.IntN(10) < 2 {
							op.action = "resolve"
						}
					case len(free) > 0:
						op = p5Op{ai, free[arng.IntN(len(free))], "claim"}
					default:
						mu.Unlock()
						return
					}
					ep := epochs[op.key]
					mu.Unlock()
					var ans string
					switch op.action {
					case "claim":
						ans = a.do("claim " + op.key)
					case "release":
						ans = a.do(fmt.Sprintf("release %s %d crash test", op.key, ep))
					case "resolve":
						ans = a.do(fmt.Sprintf("resolve %s %d", op.key, ep))
					}
					mu.Lock()
					switch {
					case strings.HasPrefix(ans, "ok "):
						acked++
						switch op.action {
						case "claim":
							var out struct{ Epoch int64 }
							json.Unmarshal([]byte(ans[3:]), &out)
							want[op.key], epochs[op.key] = p5State{"claimed", a.Name}, out.Epoch
						case "release":
							want[op.key] = p5State{status: "open"}
						case "resolve":
							want[op.key] = p5State{"verifying", a.Name}
						}
					case strings.HasPrefix(ans, "err 0 "): // snagd is gone: the operation may or may not be done
						inflight[op.key] = op
						mu.Unlock()
						return
					default:
						t.Errorf("round %d (%s): %s %s refused: %s", round, spec, op.action, op.key, ans)
						mu.Unlock()
						return
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
		}
		select {
		case <-d.done:
			if strings.Contains(d.log.String(), "failpoint") {
				fired++
				byStep[spec[strings.Index(spec, ":")+1:strings.Index(spec, "@")]]++
			} else {
				t.Fatalf("round %d: snagd died without its failpoint: %v\n%s", round, d.err, d.log.String())
			}
		default: // the failpoint did not come up: a plain crash instead
			plain++
			d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			return
		}

		// Restart (with no failpoint) and check every acknowledged state.
		began = time.Now()
		d = crSpawn(t, root, home)
		restart = append(restart, time.Since(began))
		files, leases := crCheck(t, d)
		for k, w := range want {
			f := files[k]
			got := p5State{f.Status, f.Assignee}
			if f.Status == "open" {
				got.assignee = ""
			}
			ok := got == w
			if op, in := inflight[k]; in && !ok {
				switch op.action {
				case "claim":
					ok = got == p5State{"claimed", ags[op.agent].Name}
				case "release":
					ok = got == p5State{status: "open"}
				case "resolve":
					ok = got == p5State{"verifying", ags[op.agent].Name}
				}
			}
			if !ok {
				t.Errorf("round %d (%s): %s is %+v; acknowledged %+v (in flight: %+v)", round, spec, k, got, w, inflight[k])
			}
			// What the files say now is what the agents go on from. A claim
			// that never committed left a detached lease: a person releases it.
			want[k] = got
			if l, ok := leases[f.ID]; ok && f.Status == "claimed" {
				if l.Detached {
					if code := personPost(d, "/tasks/"+k+"/release", map[string]any{"by": "dana", "reason": "crash test"}); code != 200 {
						t.Errorf("release of detached %s: %d", k, code)
					}
					want[k] = p5State{status: "open"}
				} else {
					epochs[k] = l.Epoch
				}
			}
		}
		if t.Failed() {
			return
		}
	}
	slices.Sort(restart)
	t.Logf("P5: %d crashes (%d at failpoints %v, %d plain kills), %d acknowledged operations checked, %d tasks; restart to ready p50 %s, max %s; took %s",
		crashes, fired, byStep, plain, acked, ntasks, restart[len(restart)/2].Round(time.Millisecond),
		restart[len(restart)-1].Round(time.Millisecond), time.Since(start).Round(time.Second))
}
