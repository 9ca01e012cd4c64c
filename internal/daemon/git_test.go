package daemon_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/codec"
	snagd "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/watch"
)

// needGit skips a test without git, except in CI, where it fails.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git is needed for this test: %v", err)
		}
		t.Skipf("git is needed for this test: %v", err)
	}
}

// git runs git in dir, with no user or system configuration, and returns
// its output. ok lists exit codes other than 0 that are expected.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Dana", "-c", "user.email=dana@example.com",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil && !(len(args) > 0 && args[0] == "merge") {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

const gitignore = "snag.db\nsnag.db-*\n.port\nsnagd.lock\nsnagd.log\nplan.json\n*.snag-tmp\n"

// taskWriter writes generated tasks into a project's tasks/.
type taskWriter struct {
	t     *testing.T
	tasks string
}

func newProject(t *testing.T) (root string, w taskWriter) {
	t.Helper()
	root = t.TempDir()
	tasks := filepath.Join(root, ".snag", "tasks")
	if err := os.MkdirAll(tasks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".snag", ".gitignore"), []byte(gitignore), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, taskWriter{t, tasks}
}

func (w taskWriter) write(tk *queue.Task) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.tasks, queue.FileName(tk.Key, tk.Title)), codec.Format(tk), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func genTask(n int, title string) *queue.Task {
	return &queue.Task{ID: queue.NewID(time.Now()), Key: queue.Alias(n), Title: title, Status: queue.StatusOpen,
		Trust: queue.TrustVetted, Severity: queue.SeverityMedium, Kind: queue.KindBug, Wave: 1,
		Body: []byte(fmt.Sprintf("Task %d.\n", n))}
}

// gitCheckoutScenario is W13: two branches whose tasks/ differ in
// differing files (two in five on both with other content, the rest on one
// branch only), switched between rounds times while the API is read all
// along. After each checkout the index converges to the files, and the
// leases of tasks on both branches survive.
func gitCheckoutScenario(t *testing.T, differing, rounds int) {
	needGit(t)
	root, w := newProject(t)
	manyClaims(t, root) // one agent holds three tasks across the checkouts
	const common = 20
	for n := 1; n <= common; n++ {
		w.write(genTask(n, fmt.Sprintf("Common task %d", n)))
	}
	git(t, root, "init", "-q")
	git(t, root, "add", ".")
	git(t, root, "commit", "-q", "-m", "common")
	changed := differing * 2 / 5
	only := (differing - changed) / 2
	changedTasks := make([]*queue.Task, changed)
	for i := range changedTasks {
		changedTasks[i] = genTask(common+1+i, fmt.Sprintf("Changed task %d", i))
	}
	for _, branch := range []string{"a", "b"} {
		git(t, root, "checkout", "-q", "-b", branch, "main")
		for _, tk := range changedTasks {
			c := *tk
			c.Body = []byte("The " + branch + " side of this task.\n")
			if branch == "b" {
				c.Severity, c.Assignee = queue.SeverityLow, ""
				if c.Num()%2 == 0 {
					c.Status = queue.StatusCancelled
				}
			}
			w.write(&c)
		}
		base := common + changed + 1
		if branch == "b" {
			base += only
		}
		for i := range only {
			w.write(genTask(base+i, fmt.Sprintf("Only on %s %d", branch, i)))
		}
		git(t, root, "add", ".")
		git(t, root, "commit", "-q", "-m", "branch "+branch)
	}
	git(t, root, "checkout", "-q", "a")

	// The first rescan of 5,000 files under -race on a busy machine can
	// take longer than waitReady's 20 s.
	d := spawnInProcess(t, root, "", snagd.Options{})
	d.waitReadyLong()
	iv := newInvariants(t, d)
	a := startAgent(t, d, "")
	held := map[string]int64{}
	for _, ref := range []string{"SNAG-1", "SNAG-2", "SNAG-3"} {
		_, epoch := a.claim(ref)
		held[d.taskID(ref)] = epoch
		iv.sawEpoch(d.taskID(ref), epoch)
	}
	p4 := filepath.Join(w.tasks, queue.FileName("SNAG-4", "Common task 4"))
	raw, _ := os.ReadFile(p4)
	line := "Dana: not committed, and it must survive every checkout."
	if err := os.WriteFile(p4, addLine(t, raw, line), 0o644); err != nil {
		t.Fatal(err)
	}
	iv.personAdded(d.taskID("SNAG-4"), line)

	// Readers all along: every answer must be a 200.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	reads := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, q := range []string{"/tasks?limit=50", "/tasks/SNAG-5", "/health", "/sessions"} {
				var v any
				code := d.get(q, &v)
				mu.Lock()
				reads++
				if code != http.StatusOK && len(bad) < 5 {
					bad = append(bad, fmt.Sprintf("GET %s: %d %v", q, code, v))
				}
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	for i := range rounds {
		branch := []string{"b", "a"}[i%2]
		start := time.Now()
		git(t, root, "checkout", "-q", branch)
		took := time.Since(start)
		iv.check()
		t.Logf("round %d: git checkout %s took %s; converged %s after it began", i+1, branch,
			took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		leases := iv.observe()
		for id, epoch := range held {
			if l, ok := leaseOf(leases, id); !ok || l.Epoch != epoch || l.Holder != a.Name {
				t.Errorf("round %d: the lease of %s: %+v (held %v); want epoch %d held by %s", i+1, id, l, ok, epoch, a.Name)
			}
		}
		if t.Failed() {
			break
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d API reads during the checkouts", reads)
	for _, b := range bad {
		t.Errorf("during a checkout: %s", b)
	}
	iv.final()
}

// TestW13_GitCheckout: ten checkouts between branches differing in 1,000
// task files (three with -short).
func TestW13_GitCheckout(t *testing.T) {
	t.Parallel()
	rounds := 10
	if testing.Short() {
		rounds = 3
	}
	gitCheckoutScenario(t, 1000, rounds)
}

// TestW13_GitCheckout5000: one checkout between branches differing in
// 5,000 task files (1,000 with -short): the index equals a fresh reindex
// afterwards.
func TestW13_GitCheckout5000(t *testing.T) {
	t.Parallel()
	n := 5000
	if testing.Short() {
		n = 1000
	}
	gitCheckoutScenario(t, n, 1)
}

// TestW14_MergeConflict: a git merge that leaves conflict markers in a
// task's frontmatter flags it conflict: it stays readable with its last
// good data, is not claimable, is never rewritten; once a person resolves
// the conflict it is a task again.
func TestW14_MergeConflict(t *testing.T) {
	t.Parallel()
	needGit(t)
	root := manyClaims(t, sampleProject(t))
	if err := os.WriteFile(filepath.Join(root, ".snag", ".gitignore"), []byte(gitignore), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, ".snag", "tasks", sampleName)
	orig, _ := os.ReadFile(p)
	retitle := func(title string) {
		raw, _ := os.ReadFile(p)
		next := strings.Replace(string(raw), "title: Login form clears the email after a wrong password", "title: "+title, 1)
		if next == string(raw) {
			t.Fatal("sample title not found")
		}
		os.WriteFile(p, []byte(next), 0o644)
	}
	git(t, root, "init", "-q")
	git(t, root, "add", ".")
	git(t, root, "commit", "-q", "-m", "sample")
	git(t, root, "checkout", "-q", "-b", "theirs")
	retitle("Login form forgets the email")
	git(t, root, "commit", "-q", "-am", "theirs")
	git(t, root, "checkout", "-q", "main")
	retitle("Login form loses the email on a wrong password")
	git(t, root, "commit", "-q", "-am", "ours")

	d := startInProcess(t, root, "", snagd.Options{})
	iv := newInvariants(t, d)
	a := startAgent(t, d, "")
	out := git(t, root, "merge", "theirs")
	conflicted, _ := os.ReadFile(p)
	if !strings.Contains(out, "CONFLICT") || !strings.Contains(string(conflicted), "<<<<<<<") {
		t.Fatalf("the merge left no conflict: %s\n%s", out, conflicted)
	}
	eventually(t, "SNAG-11 flagged conflict", func() bool {
		var v struct {
			Row struct{ State, Error, Title string }
		}
		return d.get("/tasks/SNAG-11", &v) == http.StatusOK && v.Row.State == "conflict"
	})
	var v struct {
		Row struct {
			State, Error, Title string
			Stale               bool
		}
		Body string
	}
	if code := d.get("/tasks/SNAG-11", &v); code != http.StatusOK || v.Row.Title != "Login form loses the email on a wrong password" ||
		!v.Row.Stale || !strings.Contains(v.Row.Error, "conflict") || !strings.Contains(v.Body, "After a wrong password") {
		t.Errorf("a conflicted task should read with its last good data and the error: %d %+v", code, v)
	}
	if ans := a.do("claim SNAG-11"); !strings.HasPrefix(ans, "err 409") || !strings.Contains(ans, "conflict") {
		t.Errorf("claim of a conflicted task: %s", ans)
	}
	for {
		ans := a.do("claim")
		if !strings.HasPrefix(ans, "ok ") || strings.Contains(ans, `"task":null`) {
			break
		}
		if strings.Contains(ans, `"SNAG-11"`) {
			t.Errorf("claim next handed out a conflicted task: %s", ans)
		}
	}
	iv.observe()
	d.waitSettled() // the second looks at the conflicted file, which never rewrite it
	if now, _ := os.ReadFile(p); string(now) != string(conflicted) {
		t.Errorf("the conflicted file was rewritten:\n%s", now)
	}
	iv.check()

	// A person resolves it: keeps theirs.
	resolved := strings.Replace(string(orig), "title: Login form clears the email after a wrong password", "title: Login form forgets the email", 1)
	if err := os.WriteFile(p, []byte(resolved), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "SNAG-11 a task again", func() bool {
		var v struct{ Row struct{ State, Title string } }
		return d.get("/tasks/SNAG-11", &v) == http.StatusOK && v.Row.State == "ok" && v.Row.Title == "Login form forgets the email"
	})
	_, epoch := a.claim("SNAG-11")
	iv.sawEpoch(d.taskID("SNAG-11"), epoch)
	iv.final()
}

// TestW16_DroppedEventCaughtByRescan: a change that makes no event (written
// through a hard link outside the watched folders) is found by the periodic
// rescan, shortened here to a second.
func TestW16_DroppedEventCaughtByRescan(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, sampleProject(t), "", snagd.Options{Watch: watch.Options{Rescan: time.Second}})
	iv := newInvariants(t, d)
	events := d.record()
	p := filepath.Join(d.root, ".snag", "tasks", sampleName)
	link := filepath.Join(d.root, "elsewhere", "linked.md")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Link(p, link); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("a hard link in the test's temp folder: %v", err)
		}
		t.Skipf("no hard links here: %v", err)
	}
	raw, _ := os.ReadFile(p)
	next := strings.Replace(string(raw), "severity: medium", "severity: critical", 1)
	events.reset() // the link changed the file's attributes alone: no batch
	start := time.Now()
	f, err := os.OpenFile(link, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, writeAll(f, []byte(next)))
	mustDo(t, f.Close())
	eventually(t, "the unseen change indexed", func() bool {
		var v struct{ Task struct{ Severity string } }
		d.get("/tasks/SNAG-11", &v)
		return v.Task.Severity == "critical"
	})
	t.Logf("the rescan found the change %s after it was made", time.Since(start).Round(time.Millisecond))
	if evs := events.all(about("tasks/" + sampleName)); len(evs) > 0 {
		t.Errorf("the change was seen as an event, so nothing was dropped: %+v", evs)
	}
	// The rescan's event follows its commit: the API may show the change
	// before the event arrives.
	isRescan := func(e event) bool { return e.Type == "rescan" }
	eventually(t, "the rescan's event", func() bool { return len(events.all(isRescan)) > 0 })
	rescans := events.all(isRescan)
	if len(rescans) != 1 || fmt.Sprint(rescans[0].Data["reasons"]) != "[timer]" || rescans[0].Data["updated"] != float64(1) {
		t.Errorf("rescans: %+v; want one timer rescan that updated one file", rescans)
	}
	mustRemove(t, link)
	iv.final()
}
