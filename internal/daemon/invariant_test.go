package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
)

// invariants checks what must hold after every scenario (TESTPLAN, Harness):
//
//	(i)   the index's set of (id, path, content) equals the files', before
//	      and after a forced full rescan (POST /rescan), and a full rescan
//	      of snag.db after the daemon stopped finds nothing to change;
//	(ii)  no task has two live holders, and every claimed task has one;
//	(iii) each task's lease epoch only grows;
//	(iv)  no temp file older than 60 s is left in tasks/;
//	(v)   every line a simulated person added to a file is still there.
//
// Create one with newInvariants right after the daemon starts, call
// observe (or sawEpoch) whenever the test looks at leases, personAdded
// whenever it adds a line as a person would, check after each scenario,
// and final once at the end: final stops the daemon and rescans its
// snag.db itself. It is safe for concurrent use.
type invariants struct {
	t    *testing.T
	d    *daemon
	mu   sync.Mutex
	last map[string]int64    // task id -> the highest epoch seen
	adds map[string][]string // task id -> lines a person added
}

func newInvariants(t *testing.T, d *daemon) *invariants {
	return &invariants{t: t, d: d, last: map[string]int64{}, adds: map[string][]string{}}
}

// sawEpoch records a lease epoch of a task and fails if it is lower than
// one seen before (iii).
func (iv *invariants) sawEpoch(taskID string, epoch int64) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if prev := iv.last[taskID]; epoch < prev {
		iv.t.Errorf("invariant (iii): %s has lease epoch %d after %d; epochs only grow", taskID, epoch, prev)
		return
	}
	iv.last[taskID] = epoch
}

// observe reads the live leases, checks that no task has two (ii), and
// records their epochs (iii). It returns them.
func (iv *invariants) observe() []leaseView {
	iv.t.Helper()
	var out struct{ Leases []leaseView }
	if code := iv.d.get("/sessions", &out); code != http.StatusOK {
		iv.t.Errorf("GET /sessions: %d", code)
		return nil
	}
	seen := map[string]string{}
	for _, l := range out.Leases {
		if h, ok := seen[l.TaskID]; ok {
			iv.t.Errorf("invariant (ii): %s has two live holders, %s and %s", l.TaskID, h, l.Holder)
		}
		seen[l.TaskID] = l.Holder
		iv.sawEpoch(l.TaskID, l.Epoch)
	}
	return out.Leases
}

// personAdded records that a person added line to the file of the task id.
func (iv *invariants) personAdded(id, line string) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	iv.adds[id] = append(iv.adds[id], line)
}

// diskTask is one task file as the test reads it, without snagd.
type diskTask struct {
	path string      // relative to .snag/
	task *queue.Task // nil when it does not parse
	err  error
}

// readTaskFiles parses every task file of the project.
func readTaskFiles(t *testing.T, root string) []diskTask {
	t.Helper()
	dir := filepath.Join(root, ".snag", "tasks")
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []diskTask
	for _, de := range des {
		if !queue.IsTaskFileName(de.Name()) || !de.Type().IsRegular() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ft := diskTask{path: path.Join("tasks", de.Name())}
		ft.task, ft.err = codec.Parse(raw)
		out = append(out, ft)
	}
	return out
}

// apiRow is a row of GET /tasks, with what the test compares.
type apiRow struct {
	ID, Key, Title, Status, Assignee, Path, State string
	Dup                                           bool `json:"duplicate"`
	Stale                                         bool
}

// listAll pages through GET /tasks?all=true.
func (d *daemon) listAll() ([]apiRow, error) {
	var rows []apiRow
	cursor := ""
	for {
		var page struct {
			Tasks []apiRow
			Next  string
		}
		q := "/tasks?all=true&limit=1000"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		if code := d.get(q, &page); code != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d", q, code)
		}
		rows = append(rows, page.Tasks...)
		if page.Next == "" {
			return rows, nil
		}
		cursor = page.Next
	}
}

// indexDiff compares the daemon's view through its API with the files, and
// returns what differs ("" when nothing). Rows are compared on id, path,
// key, title, status and assignee; with full set, each task's body and
// frontmatter are compared too, through GET /tasks/{id}.
func (iv *invariants) indexDiff(full bool) string {
	files := readTaskFiles(iv.t, iv.d.root)
	rows, err := iv.d.listAll()
	if err != nil {
		return err.Error()
	}
	var diffs []string
	byPath := map[string]apiRow{}
	for _, r := range rows {
		if _, dup := byPath[r.Path]; dup {
			diffs = append(diffs, "two rows for "+r.Path)
		}
		byPath[r.Path] = r
		if isDropping(path.Base(r.Path)) || !queue.IsTaskFileName(path.Base(r.Path)) {
			diffs = append(diffs, "a dropping is indexed: "+r.Path)
		}
	}
	ids := map[string]int{}
	for _, f := range files {
		if f.task != nil {
			ids[f.task.ID]++
		}
	}
	for _, f := range files {
		r, ok := byPath[f.path]
		delete(byPath, f.path)
		switch {
		case !ok:
			diffs = append(diffs, "not indexed: "+f.path)
		case f.task == nil:
			if r.State == snag.StateOK {
				diffs = append(diffs, fmt.Sprintf("%s does not parse (%v) but its row is ok", f.path, f.err))
			}
		default:
			tk := f.task
			want := apiRow{ID: tk.ID, Key: tk.Key, Title: tk.Title, Status: string(tk.Status), Assignee: tk.Assignee,
				Path: f.path, State: snag.StateOK, Dup: ids[tk.ID] > 1}
			got := r
			got.Dup = got.Dup && ids[tk.ID] > 1 // a shared alias alone is not compared here
			if got != want {
				diffs = append(diffs, fmt.Sprintf("%s: row %+v; the file says %+v", f.path, r, want))
			} else if full && !want.Dup {
				if d := iv.taskDiff(f); d != "" {
					diffs = append(diffs, d)
				}
			}
		}
	}
	for p, r := range byPath {
		if r.State == "missing" {
			continue // a claimed task whose file is gone: shown as missing
		}
		diffs = append(diffs, "indexed but no such file: "+p)
	}
	slices.Sort(diffs)
	if len(diffs) > 10 {
		diffs = append(diffs[:10], fmt.Sprintf("and %d more", len(diffs)-10))
	}
	return strings.Join(diffs, "\n")
}

// taskDiff compares one task as GET /tasks/{id} shows it with its file.
func (iv *invariants) taskDiff(f diskTask) string {
	var got struct {
		Task     json.RawMessage
		Body     string
		TaskFile string `json:"task_file"`
	}
	if code := iv.d.get("/tasks/"+f.task.ID, &got); code != http.StatusOK {
		return fmt.Sprintf("GET /tasks/%s: %d", f.task.ID, code)
	}
	want, _ := json.Marshal(f.task)
	var a, b any
	json.Unmarshal(got.Task, &a)
	json.Unmarshal(want, &b)
	wj, _ := json.Marshal(b)
	gj, _ := json.Marshal(a)
	switch {
	case !bytes.Equal(wj, gj):
		return fmt.Sprintf("%s: the index has %s; the file says %s", f.path, gj, wj)
	case got.Body != string(f.task.Body):
		return fmt.Sprintf("%s: the index has body %q; the file has %q", f.path, got.Body, f.task.Body)
	case got.TaskFile != path.Join(".snag", f.path):
		return fmt.Sprintf("%s: task_file %q", f.path, got.TaskFile)
	}
	return ""
}

// check waits for the index to agree with the files and then checks every
// invariant against the running daemon. It compares every task in full
// when there are at most 200.
func (iv *invariants) check() {
	iv.t.Helper()
	start := time.Now()
	n := len(readTaskFiles(iv.t, iv.d.root))
	full := n <= 200
	diff := ""
	// Generous: thousands of changed files take a while under -race.
	deadline := time.Now().Add(max(time.Minute, time.Duration(n)*40*time.Millisecond))
	for {
		if diff = iv.indexDiff(full); diff == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if diff != "" {
		iv.t.Errorf("invariant (i): the index does not match the files:\n%s", diff)
	} else {
		iv.t.Logf("the index matched the files %s after the scenario", time.Since(start).Round(time.Millisecond))
		// A forced full rescan (it runs before POST /rescan answers) must
		// leave it so.
		if code := iv.d.do(http.MethodPost, "/rescan", map[string]any{}, nil); code != http.StatusOK {
			iv.t.Errorf("POST /rescan: %d", code)
		} else if diff := iv.indexDiff(full); diff != "" {
			iv.t.Errorf("invariant (i): after a forced rescan the index does not match the files:\n%s", diff)
		}
	}
	leases := iv.observe()
	held := map[string]bool{}
	for _, l := range leases {
		held[l.TaskID] = true
	}
	rows, err := iv.d.listAll()
	if err != nil {
		iv.t.Error(err)
	}
	for _, r := range rows {
		if (r.Status == "claimed" || r.Status == "verifying") && r.State == snag.StateOK && !r.Dup && !held[r.ID] {
			iv.t.Errorf("invariant (ii): %s (%s) is %s with no live lease", r.Key, r.Path, r.Status)
		}
	}
	iv.checkFiles()
}

// checkFiles checks (iv) and (v), which need only the files.
func (iv *invariants) checkFiles() {
	iv.t.Helper()
	dir := filepath.Join(iv.d.root, ".snag", "tasks")
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), taskfs.TempSuffix) {
			continue
		}
		if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
			iv.t.Errorf("invariant (iv): temp file %s is %s old", de.Name(), time.Since(fi.ModTime()).Round(time.Second))
		}
	}
	iv.mu.Lock()
	adds := maps(iv.adds)
	iv.mu.Unlock()
	if len(adds) == 0 {
		return
	}
	byID := map[string][]byte{}
	for _, f := range readTaskFiles(iv.t, iv.d.root) {
		if f.task != nil {
			byID[f.task.ID] = f.task.Raw
		}
	}
	for id, lines := range adds {
		raw, ok := byID[id]
		for _, l := range lines {
			if !ok || !bytes.Contains(raw, []byte(l)) {
				iv.t.Errorf("invariant (v): the line %q a person added to %s is gone", l, id)
			}
		}
	}
}

func maps(m map[string][]string) map[string][]string {
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// final stops the daemon (SIGTERM, a clean exit), then opens its snag.db
// and runs a full rescan, hashing every file: a rescan that changes a row
// means the live index had drifted from the files (i). It checks (iv) and
// (v) once more.
func (iv *invariants) final() {
	iv.t.Helper()
	iv.check()
	d := iv.d
	d.sigterm()
	select {
	case <-d.done:
		if d.err != nil {
			iv.t.Errorf("snagd exit after SIGTERM: %v", d.err)
		}
	case <-time.After(20 * time.Second):
		iv.t.Fatal("snagd did not stop on SIGTERM")
	}
	ctx := context.Background()
	db, err := index.Open(ctx, filepath.Join(d.root, ".snag", "snag.db"))
	if err != nil {
		iv.t.Fatal(err)
	}
	defer db.Close()
	dir, err := taskfs.OpenDir(filepath.Join(d.root, ".snag", "tasks"))
	if err != nil {
		iv.t.Fatal(err)
	}
	defer dir.Close()
	st, err := db.Scan(ctx, dir, index.ScanOptions{Hash: true})
	if err != nil {
		iv.t.Fatal(err)
	}
	if st.Changed() {
		iv.t.Errorf("invariant (i): a full rescan after the daemon stopped changed the index "+
			"(%d added, %d updated, %d removed): the live index had drifted from the files", st.Added, st.Updated, st.Removed)
	}
	iv.checkFiles()
}

// event is one server-sent event of /events.
type event struct {
	Type string
	Data map[string]any
	At   time.Time
}

// eventLog records every event snagd sends from the moment it is made.
type eventLog struct {
	mu     sync.Mutex
	events []event
	// last is the id of the latest event read from the stream, and seen
	// is closed and replaced at each one.
	last int64
	seen chan struct{}
}

// lastEventID is the id of snagd's latest event, as a new /events stream
// names it in its first line.
func (d *daemon) lastEventID() int64 {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url("/events"), nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, ": snagd events from ")), 10, 64)
	if err != nil {
		d.t.Fatalf("the first line of /events: %q", line)
	}
	return n
}

// through waits until the stream has delivered every event up to id: an
// event published before a check is then in the log the check reads. It
// waits on the stream (the first line counts: it says where the stream
// starts); the minute only bounds a failure.
func (el *eventLog) through(t *testing.T, id int64) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		el.mu.Lock()
		last, seen := el.last, el.seen
		el.mu.Unlock()
		if last >= id {
			return
		}
		select {
		case <-seen:
		case <-deadline:
			t.Fatalf("the event stream is at %d, not %d, after a minute", last, id)
		}
	}
}

// await waits until the stream has delivered at least n events that
// match accepts: an event is published after the change it announces is
// in the index, so a check that the index shows a change has not seen its
// event yet. The minute only bounds a failure.
func (el *eventLog) await(t *testing.T, what string, n int, match func(event) bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		el.mu.Lock()
		seen := el.seen
		el.mu.Unlock()
		if len(el.all(match)) >= n {
			return
		}
		select {
		case <-seen:
		case <-deadline:
			t.Fatalf("%s: %d of %d events after a minute: %+v", what, len(el.all(match)), n, el.all(nil))
		}
	}
}

// record subscribes to /events until the test ends.
func (d *daemon) record() *eventLog {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url("/events"), nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	el := &eventLog{seen: make(chan struct{})}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var typ string
		var id int64
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, ": snagd events from "); ok {
				from, _ := strconv.ParseInt(v, 10, 64)
				el.mu.Lock()
				el.last = max(el.last, from)
				close(el.seen) // a wait for the stream's start ends here too
				el.seen = make(chan struct{})
				el.mu.Unlock()
			} else if v, ok := strings.CutPrefix(line, "id: "); ok {
				id, _ = strconv.ParseInt(v, 10, 64)
			} else if v, ok := strings.CutPrefix(line, "event: "); ok {
				typ = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				e := event{Type: typ, At: time.Now()}
				json.Unmarshal([]byte(v), &e.Data)
				el.mu.Lock()
				el.events = append(el.events, e)
				el.last = max(el.last, id)
				close(el.seen)
				el.seen = make(chan struct{})
				el.mu.Unlock()
			}
		}
	}()
	return el
}

// all returns the events so far; with match, those it accepts.
func (el *eventLog) all(match func(event) bool) []event {
	el.mu.Lock()
	defer el.mu.Unlock()
	var out []event
	for _, e := range el.events {
		if match == nil || match(e) {
			out = append(out, e)
		}
	}
	return out
}

// reset forgets the events so far.
func (el *eventLog) reset() {
	el.mu.Lock()
	el.events = nil
	el.mu.Unlock()
}

// about matches the task and problem events of one file (relative to .snag/).
func about(p string) func(event) bool {
	return func(e event) bool { return (e.Type == "task" || e.Type == "problem") && e.Data["path"] == p }
}
