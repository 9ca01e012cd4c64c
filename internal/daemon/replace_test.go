package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	snagd "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/watch"
)

// snagCLI builds the snag command once, for the tests that run it as a
// person would, and returns its path.
func snagCLI(t *testing.T) string {
	t.Helper()
	bin, err := bins.Build("snag", snagdtest.Snag)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// snag runs the snag command in the daemon's root against it, and returns
// its output and whether it exited 0.
func (d *daemon) snag(args ...string) (string, bool) {
	d.t.Helper()
	bin := snagCLI(d.t) // built on first use: the minute below is the command's alone
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), "SNAG_HOME="+d.home, "SNAG_PORT="+strconv.Itoa(d.port), "SNAG_NO_AUTOSTART=1", "SNAG_AGENT=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err == nil
}

// mustSnag runs snag and fails the test when it exits non-zero.
func (d *daemon) mustSnag(args ...string) string {
	d.t.Helper()
	out, ok := d.snag(args...)
	if !ok {
		d.t.Fatalf("snag %s failed:\n%s", strings.Join(args, " "), out)
	}
	return out
}

// cliKeys lists every task as snag list --all --json gives them, by key.
func (d *daemon) cliKeys() []string {
	d.t.Helper()
	out := d.mustSnag("list", "--all", "--json", "--limit", "1000")
	var v struct {
		Tasks []struct{ Key string }
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		d.t.Fatalf("snag list --json: %v\n%s", err, out)
	}
	var keys []string
	for _, tk := range v.Tasks {
		keys = append(keys, tk.Key)
	}
	return keys
}

// waitKeys waits until snag list --all shows n tasks.
func (d *daemon) waitKeys(n int, what string) {
	d.t.Helper()
	var keys []string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if keys = d.cliKeys(); len(keys) == n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.t.Fatalf("%s: snag list --all shows %d tasks %v; want %d", what, len(keys), keys, n)
}

// waitRescans waits until snagd has logged n more rescans for reason
// (snagd runs with --log debug, which logs each one).
func (d *daemon) waitRescans(n int, reason string) {
	d.t.Helper()
	rescans := func() int { return strings.Count(d.log.String(), "msg=rescan reasons=["+reason+"]") }
	want := rescans() + n
	eventually(d.t, fmt.Sprintf("%d %s rescans", n, reason), func() bool { return rescans() >= want })
}

// TestW8_TasksReplaced: .snag/tasks/ replaced under a running snagd, in
// each of the ways it happens (a git checkout of a branch without it and
// back, rm -rf and a restore, a swap by two renames). Afterwards snagd
// works on the new folder: a hand edit is indexed, snag add, a claim and
// snag reindex work, and snag list --all shows every task. While the
// folder is gone, snagd answers, shows no tasks, refuses an add with the
// reason, and logs no failing rescans.
func TestW8_TasksReplaced(t *testing.T) {
	t.Parallel()
	needGit(t)
	for _, how := range []string{"git-checkout", "rm-and-restore", "two-renames"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			os.WriteFile(filepath.Join(root, "README"), []byte("old\n"), 0o644)
			git(t, root, "init", "-q", "-b", "old")
			git(t, root, "add", ".")
			git(t, root, "commit", "-q", "-m", "old")
			git(t, root, "checkout", "-q", "-b", "main")
			if err := os.MkdirAll(filepath.Join(root, ".snag", "tasks"), 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(root, ".snag", ".gitignore"), []byte(gitignore), 0o644)
			w := taskWriter{t, filepath.Join(root, ".snag", "tasks")}
			for n := 1; n <= 6; n++ {
				w.write(genTask(n, fmt.Sprintf("Task %d", n)))
			}
			git(t, root, "add", ".")
			git(t, root, "commit", "-q", "-m", "tasks")
			// Timer rescans run while the folder is gone.
			d := startInProcess(t, root, "", snagd.Options{Watch: watch.Options{Rescan: 200 * time.Millisecond}})
			d.waitKeys(6, "at the start")
			tasks := filepath.Join(root, ".snag", "tasks")

			gone := func() {
				// The folder is gone for a while: snagd keeps answering and
				// says why an add cannot be made.
				d.waitKeys(0, "with tasks/ gone")
				d.waitRescans(3, "timer")
				if out, ok := d.snag("add", "while gone"); ok || !strings.Contains(out, "gone") {
					t.Errorf("snag add with tasks/ gone: ok %v, %s; want a refusal that says the folder is gone", ok, out)
				}
			}
			switch how {
			case "git-checkout":
				git(t, root, "checkout", "-q", "old")
				if _, err := os.Stat(tasks); !os.IsNotExist(err) {
					t.Fatalf("tasks/ after checking out old: %v; want it gone", err)
				}
				gone()
				git(t, root, "checkout", "-q", "main")
			case "rm-and-restore":
				if err := os.RemoveAll(tasks); err != nil {
					t.Fatal(err)
				}
				gone()
				git(t, root, "checkout", "-q", "--", ".snag/tasks")
			case "two-renames":
				next := tasks + ".new"
				if err := os.CopyFS(next, os.DirFS(tasks)); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tasks, tasks+".old"); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(next, tasks); err != nil {
					t.Fatal(err)
				}
			}
			d.waitKeys(6, "after tasks/ came back")

			// A hand edit is indexed.
			p := filepath.Join(tasks, "SNAG-2 - Task 2.md")
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, bytes.Replace(raw, []byte("title: Task 2"), []byte("title: Task 2 edited"), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the hand edit indexed", func() bool {
				var v struct{ Row struct{ Title string } }
				return d.get("/tasks/SNAG-2", &v) == 200 && v.Row.Title == "Task 2 edited"
			})

			// snag add, a claim, snag reindex.
			d.mustSnag("add", "Added after the replace")
			if _, err := os.Stat(filepath.Join(tasks, "SNAG-7 - Added after the replace.md")); err != nil {
				t.Errorf("the added task is not in the new tasks/: %v", err)
			}
			a := startAgent(t, d, "")
			a.claim("SNAG-3")
			raw, _ = os.ReadFile(filepath.Join(tasks, "SNAG-3 - Task 3.md"))
			if !bytes.Contains(raw, []byte("status: claimed")) {
				t.Errorf("the claim is not in the new tasks/ file:\n%s", raw)
			}
			d.mustSnag("reindex")
			d.waitKeys(7, "after add and reindex")
			if v := d.task("SNAG-3"); v.Row.Status != "claimed" || v.Row.Assignee != a.Name {
				t.Errorf("SNAG-3 after reindex: %+v; want claimed by %s", v.Row, a.Name)
			}
			if strings.Contains(d.log.String(), "rescan failed") || strings.Contains(d.log.String(), "sync failed") {
				t.Errorf("snagd logged failures:\n%s", d.log.String())
			}
		})
	}
}
