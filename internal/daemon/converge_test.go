package daemon_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	snagd "github.com/snagdev/snag/internal/daemon"
)

const sampleName = "SNAG-11 - Login form clears the email after a wrong password.md"

// leasedSample starts snagd in process on a copy of the sample project and
// an agent that claims SNAG-11, and waits until the watcher's batch of the
// claim's own write has been applied.
func leasedSample(t *testing.T, opts snagd.Options) (d *daemon, iv *invariants, a *agent, id string, epoch int64) {
	t.Helper()
	d = startInProcess(t, sampleProject(t), "", opts)
	iv = newInvariants(t, d)
	a = startAgent(t, d, "")
	before := d.progress().Batches
	_, epoch = a.claim("SNAG-11")
	id = d.taskID("SNAG-11")
	iv.sawEpoch(id, epoch)
	d.waitProgress("the batch of the claim's write", before+1, batches)
	return d, iv, a, id, epoch
}

func (d *daemon) taskID(ref string) string {
	d.t.Helper()
	var v struct{ Row struct{ ID string } }
	if code := d.get("/tasks/"+ref, &v); code != http.StatusOK || v.Row.ID == "" {
		d.t.Fatalf("GET /tasks/%s: %d", ref, code)
	}
	return v.Row.ID
}

// body is GET /tasks/{ref}'s body, and its status code.
func (d *daemon) body(ref string) (string, int) {
	var v struct{ Body string }
	code := d.get("/tasks/"+ref, &v)
	return v.Body, code
}

// poller reads a task through the API as fast as it can while a scenario
// runs, and keeps the first few answers that are not what want accepts.
type poller struct {
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	bad   []string
	reads int
}

func (d *daemon) poll(ref string, want func(code int, v taskView) string) *poller {
	p := &poller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			var v taskView
			code := d.get("/tasks/"+ref, &v)
			p.mu.Lock()
			p.reads++
			if why := want(code, v); why != "" && len(p.bad) < 5 {
				p.bad = append(p.bad, why)
			}
			p.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	return p
}

// end stops the poller and fails the test with what it saw wrong.
func (p *poller) end(t *testing.T, what string) {
	t.Helper()
	close(p.stop)
	<-p.done
	t.Logf("%d reads of the API during %s", p.reads, what)
	for _, b := range p.bad {
		t.Errorf("during %s the API showed %s", what, b)
	}
}

// claimedBy accepts only a healthy task held by holder.
func claimedBy(holder string) func(int, taskView) string {
	return func(code int, v taskView) string {
		if code != http.StatusOK || v.Row.State != "ok" || v.Row.Status != "claimed" || v.Row.Assignee != holder {
			return fmt.Sprintf("status %d, row %+v", code, v.Row)
		}
		return ""
	}
}

// addLine appends a line to a task file's body, as a person would.
func addLine(t *testing.T, raw []byte, line string) []byte {
	t.Helper()
	out := append(bytes.TrimRight(bytes.Clone(raw), "\n"), []byte("\n\n"+line+"\n")...)
	return out
}

// leaseOf returns the live lease of a task id, if any.
func leaseOf(leases []leaseView, id string) (leaseView, bool) {
	for _, l := range leases {
		if l.TaskID == id {
			return l, true
		}
	}
	return leaseView{}, false
}

// editorSaveOfALeasedTask is W1-W4: an editor saves a leased task. The
// index takes the new bytes exactly once, the API never shows the task
// gone, broken or released, no dropping is indexed, the lease and its epoch
// stay, and the next save is seen too.
func editorSaveOfALeasedTask(t *testing.T, ed editor) {
	// Not parallel: a save's steps are editorPause apart, 20 ms more than
	// the watcher's quiet time, and a busy process can let a step's
	// batch fold into the next (a half file that reads well is then
	// indexed as an update of its own).
	d, iv, a, id, epoch := leasedSample(t, snagd.Options{Settle: editorSettle})
	events := d.record()
	p := filepath.Join(d.root, ".snag", "tasks", sampleName)
	rel := path.Join("tasks", sampleName)
	// leasedSample waited for the claim's own write to pass, unseen.
	events.through(t, d.lastEventID())
	if evs := events.all(about(rel)); len(evs) > 0 {
		t.Errorf("snagd reindexed its own claim write: %+v", evs)
	}
	events.reset()

	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	line := "Dana: also on Safari 17, saved from " + ed.name + "."
	pl := d.poll("SNAG-11", claimedBy(a.Name))
	start := time.Now()
	ed.save(t, p, addLine(t, raw, line))
	saved := time.Now()
	iv.personAdded(id, line)
	eventually(t, "the saved line in the index", func() bool {
		b, _ := d.body("SNAG-11")
		return strings.Contains(b, line)
	})
	t.Logf("%s save indexed %s after the save began", ed.name, time.Since(start).Round(time.Millisecond))
	// A second look at a state the save went through has been taken.
	d.waitSettled()
	t.Logf("no second look pending %s after the save's last step", time.Since(saved).Round(time.Millisecond))
	pl.end(t, "a "+ed.name+" save")
	events.await(t, "the save's event", 1, about(rel))
	events.through(t, d.lastEventID()) // and anything else it published

	evs := events.all(nil)
	var mine []event
	for _, e := range evs {
		if e.Type == "task" || e.Type == "problem" {
			if e.Data["path"] != rel {
				t.Errorf("an event about another file: %s %v", e.Type, e.Data)
				continue
			}
			mine = append(mine, e)
		}
		if e.Type == "lease" || e.Type == "rescan" {
			t.Errorf("the save caused a %s event: %v", e.Type, e.Data)
		}
	}
	if len(mine) != 1 || mine[0].Type != "task" || mine[0].Data["added"] == true || mine[0].Data["removed"] == true {
		t.Errorf("the save made %d events about the file; want exactly one task update: %+v", len(mine), mine)
	}
	l, ok := leaseOf(iv.observe(), id)
	if !ok || l.Epoch != epoch || l.Holder != a.Name || l.Detached {
		t.Errorf("lease after the save: %+v (held %v); want epoch %d held by %s", l, ok, epoch, a.Name)
	}

	// The watch still works: the next save, a plain write, is seen once.
	events.reset()
	raw, _ = os.ReadFile(p)
	line2 := "Dana: and on the next save."
	if err := os.WriteFile(p, addLine(t, raw, line2), 0o644); err != nil {
		t.Fatal(err)
	}
	iv.personAdded(id, line2)
	eventually(t, "the next save", func() bool {
		b, _ := d.body("SNAG-11")
		return strings.Contains(b, line2)
	})
	events.await(t, "the next save's event", 1, about(rel))
	d.waitSettled()
	events.through(t, d.lastEventID())
	iv.final()
	if n := len(events.all(about(rel))); n != 1 {
		t.Errorf("the next save made %d events; want 1", n)
	}
}

// TestW1_VimSave: vim's backup rename, 4913 probe and swap file.
func TestW1_VimSave(t *testing.T) { editorSaveOfALeasedTask(t, editors[0]) }

// TestW2_JetBrainsSave: JetBrains's ___jb_tmp___ and ___jb_old___ dance.
func TestW2_JetBrainsSave(t *testing.T) { editorSaveOfALeasedTask(t, editors[1]) }

// TestW3_EmacsSave: emacs's lock link, auto-save file and ~ backup.
func TestW3_EmacsSave(t *testing.T) { editorSaveOfALeasedTask(t, editors[2]) }

// TestW4_VSCodeSaveOfALeasedTask: VS Code's truncate and write in place,
// on a leased task (TestW4_VSCodeTornWrite polls an open one).
func TestW4_VSCodeSaveOfALeasedTask(t *testing.T) { editorSaveOfALeasedTask(t, editors[3]) }

// TestW4_AtomicRenameSaveOfALeasedTask: a temp file renamed over the task.
func TestW4_AtomicRenameSaveOfALeasedTask(t *testing.T) { editorSaveOfALeasedTask(t, editors[4]) }

// TestW6_Rename: a rename within tasks/ keeps the id and the lease, and the
// API shows the task all along; moved out of tasks/, the task is missing
// (in GET /tasks/{ref}, list --all, snag show and the board's problems
// page; a claim is refused as missing) but its lease is kept; moved back
// in, it has the same lease.
func TestW6_Rename(t *testing.T) {
	t.Parallel()
	d, iv, a, id, epoch := leasedSample(t, snagd.Options{})
	tasks := filepath.Join(d.root, ".snag", "tasks")
	renamed := "SNAG-11 - Login form forgets the email.md"

	pl := d.poll("SNAG-11", claimedBy(a.Name))
	mustRename(t, filepath.Join(tasks, sampleName), filepath.Join(tasks, renamed))
	eventually(t, "the renamed file indexed", func() bool {
		rows, err := d.listAll()
		return err == nil && slices.ContainsFunc(rows, func(r apiRow) bool { return r.Path == "tasks/"+renamed && !r.Dup }) &&
			!slices.ContainsFunc(rows, func(r apiRow) bool { return r.Path == "tasks/"+sampleName })
	})
	d.waitSettled() // past a second look at the old name
	pl.end(t, "a rename within tasks/")
	if l, ok := leaseOf(iv.observe(), id); !ok || l.Epoch != epoch || l.Holder != a.Name {
		t.Errorf("lease after the rename: %+v (held %v); want epoch %d", l, ok, epoch)
	}
	iv.check()

	aside := filepath.Join(d.root, "aside")
	os.Mkdir(aside, 0o755)
	mustRename(t, filepath.Join(tasks, renamed), filepath.Join(aside, renamed))
	eventually(t, "the task missing", func() bool {
		var v taskView
		return d.get("/tasks/SNAG-11", &v) == http.StatusOK && v.Row.State == "missing"
	})
	d.waitSettled() // the second look that found it missing, and its reconcile
	// Every surface shows it missing, with its holder.
	if v := d.task("SNAG-11"); v.Row.State != "missing" || v.Row.Status != "claimed" || v.Row.Assignee != a.Name {
		t.Errorf("GET /tasks/SNAG-11 with the file moved out: %+v; want missing, claimed by %s", v.Row, a.Name)
	}
	if rows, err := d.listAll(); err != nil || !slices.ContainsFunc(rows, func(r apiRow) bool { return r.Key == "SNAG-11" && r.State == "missing" }) {
		t.Errorf("GET /tasks?all=true with the file moved out: %v; want SNAG-11 missing in it", err)
	}
	if out := d.mustSnag("list", "--all"); !strings.Contains(out, "SNAG-11") {
		t.Errorf("snag list --all with the file moved out lacks SNAG-11:\n%s", out)
	}
	if out, _ := d.snag("show", "SNAG-11"); !strings.Contains(out, "state:     missing") || !strings.Contains(out, "move the file back") {
		t.Errorf("snag show SNAG-11 with the file moved out does not say it is missing:\n%s", out)
	}
	other := startAgent(t, d, "")
	if ans := other.do("claim SNAG-11"); !strings.Contains(ans, `"error":"missing"`) || !strings.Contains(ans, "move the file back") {
		t.Errorf("another agent's claim of the missing task: %s; want it refused as missing, naming the fix", ans)
	}
	if page := d.boardPage("/problems"); !strings.Contains(page, "missing") || !strings.Contains(page, renamed) {
		t.Errorf("the board's problems page does not list the missing task:\n%s", page)
	}
	if l, ok := leaseOf(iv.observe(), id); !ok || l.Epoch != epoch || l.Holder != a.Name {
		t.Errorf("lease with the file moved out: %+v (held %v); want it kept, epoch %d", l, ok, epoch)
	}
	if d.auditHas("lease_end", "") || d.auditHas("release", "") {
		t.Error("moving the file out ended the lease")
	}
	iv.check()

	mustRename(t, filepath.Join(aside, renamed), filepath.Join(tasks, renamed))
	eventually(t, "the task back", func() bool {
		var v taskView
		return d.get("/tasks/SNAG-11", &v) == http.StatusOK && v.Row.State == "ok"
	})
	if v := d.task("SNAG-11"); v.Row.Status != "claimed" || v.Row.Assignee != a.Name || v.Row.State != "ok" {
		t.Errorf("the task back: %+v", v.Row)
	}
	if l, ok := leaseOf(iv.observe(), id); !ok || l.Epoch != epoch || l.Holder != a.Name || l.Detached {
		t.Errorf("lease with the file back: %+v (held %v); want the same lease, epoch %d", l, ok, epoch)
	}
	if ans := a.do(fmt.Sprintf("release SNAG-11 %d done with the rename", epoch)); !strings.HasPrefix(ans, "ok ") {
		t.Errorf("the holder's release with its epoch after the moves: %s", ans)
	}
	iv.final()
}

// TestW7_DeleteAndRecreate: a file removed and written again with the same
// id within the coalescing window is a modification: no removal is seen,
// the lease stays.
func TestW7_DeleteAndRecreate(t *testing.T) {
	t.Parallel()
	d, iv, a, id, epoch := leasedSample(t, snagd.Options{})
	events := d.record()
	p := filepath.Join(d.root, ".snag", "tasks", sampleName)
	events.reset()
	pl := d.poll("SNAG-11", claimedBy(a.Name))
	for i := range 3 {
		raw, _ := os.ReadFile(p)
		line := fmt.Sprintf("Dana: recreated, take %d.", i)
		mustRemove(t, p)
		if err := os.WriteFile(p, addLine(t, raw, line), 0o644); err != nil {
			t.Fatal(err)
		}
		iv.personAdded(id, line)
		eventually(t, "the recreated file", func() bool { b, _ := d.body("SNAG-11"); return strings.Contains(b, line) })
	}
	d.waitSettled() // past a second look at a file seen gone
	pl.end(t, "deletes and recreations")
	events.through(t, d.lastEventID())
	for _, e := range events.all(nil) {
		if e.Data["removed"] == true || e.Data["added"] == true || e.Type == "lease" || e.Type == "problem" {
			t.Errorf("a delete and recreate showed as %s %v; want a modification", e.Type, e.Data)
		}
	}
	if l, ok := leaseOf(iv.observe(), id); !ok || l.Epoch != epoch {
		t.Errorf("lease after delete and recreate: %+v (held %v); want epoch %d", l, ok, epoch)
	}
	iv.final()
}

// TestW12_OneWritePerClaim: a claim (and a release) writes the task file
// once, a rename into place, and snagd does not reindex its own write.
func TestW12_OneWritePerClaim(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, sampleProject(t), "", snagd.Options{})
	iv := newInvariants(t, d)
	a := startAgent(t, d, "")
	events := d.record()
	tasks := filepath.Join(d.root, ".snag", "tasks")
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	if err := fw.Add(tasks); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []fsnotify.Event
	go func() {
		for ev := range fw.Events {
			mu.Lock()
			seen = append(seen, ev)
			mu.Unlock()
		}
	}()
	rel := path.Join("tasks", sampleName)
	var epoch int64
	for _, step := range []string{"claim", "release"} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		events.reset()
		before := d.progress().Batches
		if step == "claim" {
			_, epoch = a.claim("SNAG-11")
			iv.sawEpoch(d.taskID("SNAG-11"), epoch)
		} else if ans := a.do(fmt.Sprintf("release SNAG-11 %d checking writes", epoch)); !strings.HasPrefix(ans, "ok ") {
			t.Fatalf("release: %s", ans)
		}
		fi1, _ := os.Stat(filepath.Join(tasks, sampleName))
		d.waitProgress("the batch of the "+step+"'s write", before+1, batches)
		d.waitSettled()
		fi2, _ := os.Stat(filepath.Join(tasks, sampleName))
		if !os.SameFile(fi1, fi2) || !fi1.ModTime().Equal(fi2.ModTime()) {
			t.Errorf("%s: the file was written again after the answer", step)
		}
		mu.Lock()
		// The new bytes are swapped in atomically: the old file then shows
		// up under the temp file's name for a moment, and is removed. That
		// is still one temp file and one file put in place.
		var creates, writes int
		tempNames := map[string]bool{}
		for _, ev := range seen {
			name := filepath.Base(ev.Name)
			switch {
			case name == sampleName && ev.Has(fsnotify.Create):
				creates++
			case name == sampleName && (ev.Has(fsnotify.Write) || ev.Has(fsnotify.Remove)):
				writes++
			case strings.HasPrefix(name, "."+sampleName) && ev.Has(fsnotify.Create):
				tempNames[name] = true
			}
		}
		temps := len(tempNames)
		t.Logf("%s: file events %v", step, seen)
		mu.Unlock()
		if creates != 1 || writes != 0 || temps != 1 {
			t.Errorf("%s: %d renames into place, %d writes in place or removals, %d temp files; want 1, 0, 1", step, creates, writes, temps)
		}
		events.through(t, d.lastEventID())
		if evs := events.all(about(rel)); len(evs) > 0 {
			t.Errorf("%s: snagd reindexed its own write: %+v", step, evs)
		}
	}
	iv.final()
}

// TestW15_DuplicateIDs: two files with the same id are both flagged, the
// error names both paths, neither is written to or handed out; removing
// one brings the other back.
func TestW15_DuplicateIDs(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, manyClaims(t, sampleProject(t)), "", snagd.Options{})
	iv := newInvariants(t, d)
	a := startAgent(t, d, "")
	tasks := filepath.Join(d.root, ".snag", "tasks")
	raw, err := os.ReadFile(filepath.Join(tasks, sampleName))
	if err != nil {
		t.Fatal(err)
	}
	copyName := "SNAG-11 - Login form clears the email (copy).md"
	if err := os.WriteFile(filepath.Join(tasks, copyName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both files flagged", func() bool {
		rows, _ := d.listAll()
		n := 0
		for _, r := range rows {
			if r.Key == "SNAG-11" && r.Dup {
				n++
			}
		}
		return n == 2
	})
	var e struct{ Error, Message string }
	if code := d.get("/tasks/SNAG-11", &e); code != http.StatusConflict ||
		!strings.Contains(e.Message, "tasks/"+sampleName) || !strings.Contains(e.Message, "tasks/"+copyName) {
		t.Errorf("GET /tasks/SNAG-11 with two files: %d %+v; want 409 naming both files", code, e)
	}
	id := d.taskIDFromFile(raw)
	for _, ref := range []string{"SNAG-11", id} {
		if ans := a.do("claim " + ref); !strings.HasPrefix(ans, "err 409") {
			t.Errorf("claim %s with two files: %s", ref, ans)
		}
	}
	for {
		ans := a.do("claim")
		if strings.Contains(ans, `"task":null`) || !strings.HasPrefix(ans, "ok ") {
			break
		}
		if strings.Contains(ans, `"SNAG-11"`) {
			t.Errorf("claim next handed out a duplicated task: %s", ans)
		}
	}
	iv.observe()
	for _, name := range []string{sampleName, copyName} {
		if got, _ := os.ReadFile(filepath.Join(tasks, name)); !bytes.Equal(got, raw) {
			t.Errorf("%s was written to while duplicated", name)
		}
	}
	iv.check()

	mustRemove(t, filepath.Join(tasks, copyName))
	eventually(t, "SNAG-11 whole again", func() bool { _, code := d.body("SNAG-11"); return code == http.StatusOK })
	if _, ep := a.claim("SNAG-11"); ep == 0 {
		t.Error("SNAG-11 not claimable once the copy is gone")
	}
	iv.final()
}

// taskIDFromFile reads the id line of a task file.
func (d *daemon) taskIDFromFile(raw []byte) string {
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "id: "); ok {
			return strings.TrimSpace(v)
		}
	}
	d.t.Fatal("no id line")
	return ""
}

// loginLink asks snagd for a one-time login link to the board, as snag
// open does.
func (d *daemon) loginLink() string {
	d.t.Helper()
	var out struct {
		URL string `json:"url"`
	}
	if code := d.do(http.MethodPost, "/login-codes", map[string]any{"by": "dana"}, &out); code != http.StatusCreated {
		d.t.Fatalf("POST /login-codes: %d", code)
	}
	return out.URL
}

// boardPage logs in to the board with a one-time link, as a browser does,
// and returns the page at path.
func (d *daemon) boardPage(path string) string {
	d.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(d.loginLink())
	if err != nil {
		d.t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(d.url(path))
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET %s on the board: %d\n%s", path, resp.StatusCode, b)
	}
	return string(b)
}
