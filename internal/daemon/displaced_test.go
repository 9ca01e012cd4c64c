package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/codec"
	daemonpkg "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// TestS7_InPlaceAppendsSurviveClaims: a program appends a unique line to a
// task file every 3 ms, opening the path each time (as an editor saving in
// place does), while an agent claims and releases the same task in a loop.
// A line written into the file snagd's swap displaced is brought back:
// every line is in the file at the end, and its frontmatter is valid.
// SNAG_S7_ROUNDS sets the number of claim and release rounds.
func TestS7_InPlaceAppendsSurviveClaims(t *testing.T) {
	t.Parallel()
	rounds := scaled(t, 1000, 150, "SNAG_S7_ROUNDS")
	root := sampleProject(t)
	p := filepath.Join(root, samplePath)
	d := startDaemon(t, root, "")
	a := startAgent(t, d, "")

	const maxLines = 6000
	stop := make(chan struct{})
	type result struct {
		lines []string
		err   error
	}
	appended := make(chan result, 1)
	go func() {
		var lines []string
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if i == maxLines {
				<-stop // enough lines: a slow machine must not grow the file past its limit
			}
			select {
			case <-stop:
				appended <- result{lines, nil}
				return
			case <-tick.C:
			}
			line := fmt.Sprintf("appended line %d %x", i, time.Now().UnixNano())
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				_, err = f.WriteString(line + "\n")
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				appended <- result{lines, err}
				return
			}
			lines = append(lines, line)
		}
	}()

	refused := map[string]int{}
	deadline := time.Now().Add(5 * time.Minute)
	done := 0
	for done < rounds && time.Now().Before(deadline) {
		ans := a.do("claim SNAG-11")
		var out struct{ Epoch int64 }
		if !strings.HasPrefix(ans, "ok ") || json.Unmarshal([]byte(ans[3:]), &out) != nil || out.Epoch == 0 {
			refused[ans]++
			time.Sleep(time.Millisecond)
			continue
		}
		for time.Now().Before(deadline) {
			ans = a.do(fmt.Sprintf("release SNAG-11 %d round", out.Epoch))
			if strings.HasPrefix(ans, "ok ") {
				break
			}
			refused[ans]++
			if strings.Contains(ans, `"error":"stale"`) {
				break // the lease ended (the file said so): claim again
			}
			time.Sleep(time.Millisecond)
		}
		done++
		if testing.Verbose() && done%10 == 0 {
			t.Logf("round %d at %s", done, time.Now().Format("15:04:05.000"))
		}
	}
	close(stop)
	res := <-appended
	if res.err != nil {
		t.Fatalf("the appender failed: %v", res.err)
	}
	if done < rounds {
		raw, _ := os.ReadFile(p)
		if len(raw) > 4000 {
			raw = raw[:4000]
		}
		t.Fatalf("only %d of %d rounds before the deadline; refusals: %v\nthe file begins:\n%s", done, rounds, refused, raw)
	}
	t.Logf("%d rounds, %d lines appended; refusals: %v", done, len(res.lines), refused)

	// The displaced files are looked at again in the background: wait
	// until every line is in, and no displaced file is left.
	var final []byte
	var missing []string
	deadlineLines := time.Now().Add(time.Minute)
	for {
		final, _ = os.ReadFile(p)
		missing = missing[:0]
		for _, l := range res.lines {
			if !bytes.Contains(final, []byte(l+"\n")) {
				missing = append(missing, l)
			}
		}
		temps, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".*"+taskfs.TempSuffix))
		if len(missing) == 0 && len(temps) == 0 || time.Now().After(deadlineLines) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d appended lines are not in the file, first %q", len(missing), len(res.lines), missing[0])
	}
	tk, err := codec.Parse(final)
	if err != nil {
		t.Fatalf("the file does not parse at the end: %v\n%s", err, final)
	}
	if tk.Status != queue.StatusOpen || tk.Assignee != "" {
		t.Errorf("the task at the end: status %s, assignee %q; want open and no assignee", tk.Status, tk.Assignee)
	}
	recovered, _ := os.ReadDir(filepath.Join(root, ".snag", "recovered"))
	if len(recovered) > 0 {
		t.Errorf("%d saves kept aside in .snag/recovered; want every one merged", len(recovered))
	}
}

// TestS7_ASaveInTheDisplacedFileSurvivesACrash: snagd is killed right after
// a claim's swap, while the file it displaced waits under a hidden temp
// name to be looked at, and a person's save lands in that file (an editor
// that had it open saves in place). The restarted snagd does not sweep
// the save away with snag's own temp files: its bytes are kept in
// .snag/recovered/, the audit log names that file, and nothing else is
// kept there. A displaced file that holds only snag's bytes (the claim
// failpoints' case) is removed as before.
func TestS7_ASaveInTheDisplacedFileSurvivesACrash(t *testing.T) {
	t.Parallel()
	root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
	d := crSpawn(t, root, home, daemonpkg.FailpointEnv+"=claim:renamed")
	a := startAgent(t, d, "")
	if ans := a.do("claim SNAG-11"); strings.HasPrefix(ans, "ok ") {
		t.Fatalf("the claim was acknowledged though snagd died: %s", ans)
	}
	crKilled(t, d, "claim:renamed")

	temps, _ := filepath.Glob(filepath.Join(root, ".snag", "tasks", ".*"+taskfs.TempSuffix))
	if len(temps) != 1 {
		t.Fatalf("temp files after the kill: %q; want the one the swap displaced", temps)
	}
	displaced, err := os.ReadFile(temps[0])
	if err != nil {
		t.Fatal(err)
	}
	if tk, err := codec.Parse(displaced); err != nil || tk.Status != queue.StatusOpen {
		t.Fatalf("the displaced file is not the open task the claim swapped out (%v):\n%s", err, displaced)
	}
	const line = "A line the person saved into the file they had open.\n"
	f, err := os.OpenFile(temps[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
	f.Close()

	d2 := startDaemon(t, root, home)
	crCheck(t, d2) // every file whole, no temp file left, the index agrees
	kept, _ := filepath.Glob(filepath.Join(root, ".snag", "recovered", "[^.]*"))
	if len(kept) != 1 {
		t.Fatalf("files kept in .snag/recovered/: %q; want the person's save", kept)
	}
	if b, _ := os.ReadFile(kept[0]); !bytes.Equal(b, append(displaced, line...)) {
		t.Errorf("%s holds:\n%s\nwant the displaced file with the person's line", kept[0], b)
	}
	if !d2.auditHas("edit", filepath.Base(kept[0])) {
		t.Errorf("the audit log does not name %s", filepath.Base(kept[0]))
	}
}
