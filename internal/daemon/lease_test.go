package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/codec"
	snagd "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/queue"
)

type taskView struct {
	Row struct {
		Key, Status, Assignee, State string
	} `json:"row"`
}

func (d *daemon) task(ref string) taskView {
	d.t.Helper()
	var v taskView
	if code := d.get("/tasks/"+ref, &v); code != 200 {
		d.t.Fatalf("GET /tasks/%s: %d", ref, code)
	}
	return v
}

type leaseView struct {
	TaskID   string `json:"task_id"`
	Holder   string `json:"holder"`
	Epoch    int64  `json:"epoch"`
	Detached bool   `json:"detached"`
}

func (d *daemon) leases() []leaseView {
	d.t.Helper()
	var out struct{ Leases []leaseView }
	d.get("/sessions", &out)
	return out.Leases
}

func (d *daemon) auditHas(action, detail string) bool {
	var out struct {
		Entries []struct{ Action, Detail, Outcome string }
	}
	d.get("/audit?limit=1000", &out)
	for _, e := range out.Entries {
		if e.Action == action && strings.Contains(e.Detail, detail) {
			return true
		}
	}
	return false
}

func TestClaimReleaseResolve(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startInProcess(t, root, "", snagd.Options{})
	a := startAgent(t, d, "")
	before, _ := os.ReadFile(filepath.Join(root, samplePath))

	key, epoch := a.claim("SNAG-11")
	if v := d.task("SNAG-11"); key != "SNAG-11" || v.Row.Status != "claimed" || v.Row.Assignee != a.Name {
		t.Fatalf("after claim: %s %+v", key, v)
	}
	// The holder claiming its own task again (a retry) gets its lease back
	// as it is; another agent is refused, naming the holder.
	if _, again := a.claim("SNAG-11"); again != epoch {
		t.Errorf("the holder's second claim: epoch %d, want its lease's %d", again, epoch)
	}
	b := startAgent(t, d, "")
	if ans := b.do("claim SNAG-11"); !strings.Contains(ans, "err 409") || !strings.Contains(ans, a.Name) {
		t.Errorf("another agent's claim of a held task: %s", ans)
	}
	if ans := a.do(fmt.Sprintf("release SNAG-11 %d", epoch)); !strings.Contains(ans, "no_reason") {
		t.Errorf("release without a reason: %s", ans)
	}
	if ans := a.do(fmt.Sprintf("release SNAG-11 %d needs a product decision", epoch)); !strings.HasPrefix(ans, "ok ") {
		t.Fatalf("release: %s", ans)
	}
	if after, _ := os.ReadFile(filepath.Join(root, samplePath)); !bytes.Equal(before, after) {
		t.Errorf("claim + release changed the file:\n%s", after)
	}
	if !d.auditHas("release", "needs a product decision") {
		t.Error("the release reason is not in the audit log")
	}
	if ans := a.do(fmt.Sprintf("resolve SNAG-11 %d", epoch)); !strings.Contains(ans, "err 409") {
		t.Errorf("resolve with the released epoch: %s", ans)
	}
	_, epoch2 := a.claim("SNAG-11")
	if epoch2 <= epoch {
		t.Errorf("epoch %d after %d; epochs only grow", epoch2, epoch)
	}
	// The sample's verify command is not approved here: nothing runs,
	// and the resolve says so at once.
	if ans := a.do(fmt.Sprintf("resolve SNAG-11 %d", epoch2)); !strings.Contains(ans, `"status":"needs_review"`) || !strings.Contains(ans, `"code":"needs_approval"`) {
		t.Errorf("resolve with an unapproved verify command: %s; want needs_review, needs_approval", ans)
	}
}

func TestClaimNextSkipsBlockedAndSaysWhyWhenNothingIsReady(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, manyClaims(t, sampleProject(t)), "", snagd.Options{})
	a := startAgent(t, d, "")
	if ans := a.do("claim SNAG-9"); !strings.Contains(ans, "blocked by SNAG-7") {
		t.Errorf("claim of a blocked task without force: %s", ans)
	}
	seen := map[string]bool{}
	for {
		ans := a.do("claim")
		if strings.Contains(ans, `"task":null`) {
			if !strings.Contains(ans, "nothing is ready") {
				t.Errorf("empty claim without a reason: %s", ans)
			}
			break
		}
		var out struct{ Task struct{ Key string } }
		json.Unmarshal([]byte(strings.TrimPrefix(ans, "ok ")), &out)
		if out.Task.Key == "" || seen[out.Task.Key] {
			t.Fatalf("claim next: %s", ans)
		}
		seen[out.Task.Key] = true
	}
	for _, blocked := range []string{"SNAG-9", "SNAG-13"} {
		if seen[blocked] {
			t.Errorf("claim next handed out %s, which is blocked", blocked)
		}
	}
	if len(seen) != 6 { // the open, unblocked tasks of the sample
		t.Errorf("claimed %d tasks: %v", len(seen), seen)
	}
}

// TestL3_KilledAgentReleases: a holder killed with SIGKILL loses its lease
// once the grace has passed; the task is open again, the other agent's is
// not touched. (How long it took is logged, not asserted.)
func TestL3_KilledAgentReleases(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, sampleProject(t), "", snagd.Options{})
	a := startAgent(t, d, "")
	b := startAgent(t, d, "")
	a.claim("SNAG-11")
	b.claim("SNAG-12")
	start := time.Now()
	a.cmd.Process.Kill()
	eventually(t, "SNAG-11 open again", func() bool { return d.task("SNAG-11").Row.Status == "open" })
	t.Logf("released %s after the kill (the grace is 3 s)", time.Since(start).Round(time.Millisecond))
	if v := d.task("SNAG-12"); v.Row.Status != "claimed" || v.Row.Assignee != b.Name {
		t.Errorf("the other agent's task: %+v", v)
	}
	if !d.auditHas("release", "holder gone") {
		t.Error("no audit entry for the release")
	}
}

// TestL4_StoppedAgentKeepsItsLease: SIGSTOP is not death. A person's forced
// release bumps the epoch, and after SIGCONT the old holder is stale.
func TestL4_StoppedAgentKeepsItsLease(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, sampleProject(t), "", snagd.Options{})
	a := startAgent(t, d, "")
	_, epoch := a.claim("SNAG-11")
	a.cmd.Process.Signal(syscall.SIGSTOP)
	d.waitSweepsSpan(snagd.DefaultGrace+snagd.DefaultSweep, snagd.DefaultSweep) // more than the grace and two sweeps
	if v := d.task("SNAG-11"); v.Row.Status != "claimed" {
		a.cmd.Process.Signal(syscall.SIGCONT)
		t.Fatalf("a stopped agent lost its task: %+v", v)
	}
	if code := d.do("POST", "/tasks/SNAG-11/release", map[string]any{"by": "dana", "reason": "taking over"}, nil); code != 200 {
		t.Fatalf("person's release: %d", code)
	}
	a.cmd.Process.Signal(syscall.SIGCONT)
	if ans := a.do(fmt.Sprintf("resolve SNAG-11 %d", epoch)); !strings.Contains(ans, "stale") {
		t.Errorf("resolve by the old holder after a forced release: %s", ans)
	}
	if d.task("SNAG-11").Row.Status != "open" {
		t.Error("the task is not open after the forced release")
	}
}

// TestHandEditOfALeasedTaskEndsTheLease: the file wins.
func TestHandEditOfALeasedTaskEndsTheLease(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startInProcess(t, root, "", snagd.Options{})
	a := startAgent(t, d, "")
	_, epoch := a.claim("SNAG-11")
	p := filepath.Join(root, samplePath)
	raw, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(raw, []byte("status: claimed"), []byte("status: open"), 1), 0o644)
	eventually(t, "the lease to end", func() bool { return len(d.leasesOf("SNAG-11")) == 0 })
	if !d.auditHas("lease_end", "edited by hand") {
		t.Error("the audit log does not say why the lease ended")
	}
	if ans := a.do(fmt.Sprintf("resolve SNAG-11 %d", epoch)); !strings.Contains(ans, "err 409") {
		t.Errorf("resolve after the hand edit: %s", ans)
	}
}

func (d *daemon) leasesOf(key string) []leaseView {
	var v struct {
		Task struct{ ID string } `json:"task"`
	}
	d.get("/tasks/"+key, &v)
	var out []leaseView
	for _, l := range d.leases() {
		if l.TaskID == v.Task.ID {
			out = append(out, l)
		}
	}
	return out
}

// TestL5_DaemonRestartKeepsLiveLeases: snagd killed while agents hold tasks
// and one agent dies meanwhile: after a restart the live ones keep theirs,
// the dead one's is released.
func TestL5_DaemonRestartKeepsLiveLeases(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startDaemon(t, root, "")
	var agents []*agent
	var keys []string
	for _, ref := range []string{"SNAG-4", "SNAG-5", "SNAG-8", "SNAG-11", "SNAG-12"} {
		a := startAgent(t, d, "")
		a.claim(ref)
		agents = append(agents, a)
		keys = append(keys, ref)
	}
	d.cmd.Process.Kill()
	<-d.done
	agents[0].cmd.Process.Kill() // dies while snagd is down
	<-agents[0].done
	d2 := startDaemon(t, root, d.home)
	eventually(t, "the dead agent's task released", func() bool { return d2.task(keys[0]).Row.Status == "open" })
	d2.waitSweepsSpan(snagd.DefaultGrace, snagd.DefaultSweep) // past the grace and a sweep: the live agents have reconnected
	for i, a := range agents[1:] {
		if v := d2.task(keys[i+1]); v.Row.Status != "claimed" || v.Row.Assignee != a.Name {
			t.Errorf("%s after restart: %+v; want claimed by %s", keys[i+1], v.Row, a.Name)
		}
	}
}

// TestClaimsAreExactlyOnce: 32 agents claim next from 2,000 tasks: every
// task is claimed once, none twice, none lost.
func TestClaimsAreExactlyOnce(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	tasks := filepath.Join(root, ".snag", "tasks")
	os.MkdirAll(tasks, 0o755)
	const n = 2000
	for i := 1; i <= n; i++ {
		tk := &queue.Task{ID: queue.NewID(time.Now()), Key: queue.Alias(i), Title: fmt.Sprintf("Task %d", i),
			Status: queue.StatusOpen, Trust: queue.TrustVetted, Severity: queue.SeverityMedium, Kind: queue.KindBug, Wave: 1}
		os.WriteFile(filepath.Join(tasks, queue.FileName(tk.Key, tk.Title)), codec.Format(tk), 0o644)
	}
	d := startInProcess(t, manyClaims(t, root), "", snagd.Options{})
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range 32 {
		a := startAgent(t, d, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ans := a.do("claim")
				if strings.Contains(ans, `"task":null`) {
					return
				}
				var out struct{ Task struct{ Key string } }
				if err := json.Unmarshal([]byte(strings.TrimPrefix(ans, "ok ")), &out); err != nil || out.Task.Key == "" {
					t.Errorf("claim: %s", ans)
					return
				}
				mu.Lock()
				got[out.Task.Key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != n {
		t.Errorf("%d tasks claimed; want %d", len(got), n)
	}
	for k, c := range got {
		if c != 1 {
			t.Errorf("%s claimed %d times", k, c)
		}
	}
}

// TestANewcomerDoesNotInheritAPulledClaim: an agent given a name from the
// pool (it asked for none) is not the agent a task file that arrives
// later (a git pull, another branch's work) names as its assignee: the
// file's lease is detached, not the newcomer's, and the newcomer's claim
// of that task is refused like anyone's.
func TestANewcomerDoesNotInheritAPulledClaim(t *testing.T) {
	t.Parallel()
	root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
	d := startInProcess(t, root, home, snagd.Options{})
	a := startAgent(t, d, "")
	pulled := fmt.Sprintf(`---
id: tsk_01M9ZZZZZZZZZZZZZZZZZZZZ30
key: SNAG-30
title: Work an agent of this name did on another branch
status: claimed
trust: vetted
severity: medium
kind: bug
wave: 1
assignee: %s
created: 2026-11-30T10:00:00Z
updated: 2026-11-30T10:00:00Z
---
`, a.Name)
	if err := os.WriteFile(filepath.Join(root, ".snag", "tasks", "SNAG-30 - Work an agent of this name did on another branch.md"), []byte(pulled), 0o644); err != nil {
		t.Fatal(err)
	}
	id := "tsk_01M9ZZZZZZZZZZZZZZZZZZZZ30"
	eventually(t, "the pulled file's lease", func() bool {
		for _, l := range d.leases() {
			if l.TaskID == id {
				return true
			}
		}
		return false
	})
	for _, l := range d.leases() {
		if l.TaskID == id && !l.Detached {
			t.Errorf("the pulled claim's lease went to the newcomer %s: %+v; want it detached", a.Name, l)
		}
	}
	if ans := a.do("claim SNAG-30"); strings.HasPrefix(ans, "ok ") {
		t.Errorf("the newcomer %s claims the pulled task as its own: %s", a.Name, ans)
	}
}

// TestARestartedAgentGetsItsNameAtOnce: an agent that asked for a name
// stops (its editor closed, its MCP server restarted) and starts again
// asking for the name: it gets it at its first ask, whether snagd ran on
// meanwhile or restarted too. The old session's process is gone, so it is
// ended then (its task goes back to the queue, as when the sweep finds
// it), not a sweep later, and the live state hears of that end before it
// is asked whether the name is free (the registration sends the outbox
// first): in process, where the sender ran later, the agent started again
// was once named anew in most runs.
func TestARestartedAgentGetsItsNameAtOnce(t *testing.T) {
	t.Parallel()
	root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
	d := startInProcess(t, root, home, snagd.Options{})
	for round, restart := range []bool{false, true} {
		a := startAgent(t, d, "WREN")
		if a.Name != "WREN" {
			t.Fatalf("round %d: the agent asked for WREN and got %s", round, a.Name)
		}
		a.claim("SNAG-11")
		a.cmd.Process.Kill()
		<-a.done
		if restart {
			d.terminate()
			d = startInProcess(t, root, home, snagd.Options{})
		}
		b := startAgent(t, d, "WREN")
		if b.Name != "WREN" {
			t.Errorf("round %d (snagd restarted: %v): the agent started again asked for WREN and got %s", round, restart, b.Name)
		}
		if st := d.task("SNAG-11").Row.Status; st != "open" {
			t.Errorf("round %d: the gone agent's task is %s, want open again", round, st)
		}
		b.cmd.Process.Kill()
		<-b.done
	}
}
