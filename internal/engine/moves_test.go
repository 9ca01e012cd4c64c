package engine

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/taskfs"
)

// sample copies .snag-example into a fresh project root, without plan.json.
func sample(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	snagdtest.CopySample(t, root)
	os.Remove(filepath.Join(root, project.Folder, project.PlanFile))
	return root
}

// open opens an engine on root as snagd alone does, a member of the
// repository's embedded live state, and reads every file and reconciles
// its leases, as Run's first rescan and team loop do; its background
// loops are not run (a test drives what it needs). The engine is closed
// when the test ends.
func open(t *testing.T, root string) *Engine {
	t.Helper()
	ctx := context.Background()
	e, err := Open(ctx, Options{Root: root, Home: t.TempDir(), Coord: joinLive(t, root)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	e.Rescan(ctx)
	e.TeamReconciled() // a new live state has nothing to reconcile: as the team service's first reconcile finds
	if !e.Ready() {
		t.Fatal("the first rescan did not make the engine ready")
	}
	return e
}

// joinLive opens an embedded live state in a folder of the test's own and
// joins it for root, as snagd joins the repository's; it is closed when
// the test ends.
func joinLive(tb testing.TB, root string) coord.Live {
	tb.Helper()
	live, err := coord.OpenEmbedded(context.Background(), filepath.Join(tb.TempDir(), coord.EmbeddedFile),
		coord.Options{Host: "test", Root: root})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(live.Close)
	return live
}

// agentMove makes a move for the agent VESPER, as a claim or a release
// does, without the lease.
func agentMove(e *Engine, ref queue.Ref, action queue.Action) (*queue.Task, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.move(context.Background(), ref, action, queue.Agent, "VESPER")
}

// readTask reads the file of the task ref names.
func readTask(t *testing.T, e *Engine, ref queue.Ref) []byte {
	t.Helper()
	it, err := e.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(e.p.Abs(it.Path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAddByPersonAndByAgent(t *testing.T) {
	e := open(t, sample(t))
	ctx := context.Background()
	tk, path, err := e.Add(ctx, NewTask{Title: "Wishlist heart does not fill in", Kind: queue.KindUX,
		Files: []queue.FileRef{{Path: "web/wishlist.ts", Lines: [2]int{3, 9}}}, DependsOn: []string{"SNAG-3"},
		Body: []byte("Tap the heart: nothing.")}, queue.Person, "dana")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Key != "SNAG-21" || tk.Status != queue.StatusOpen || tk.Trust != queue.TrustVetted {
		t.Errorf("person's task: key %s status %s trust %s; want SNAG-21 open vetted", tk.Key, tk.Status, tk.Trust)
	}
	raw, err := os.ReadFile(e.p.Abs(path))
	if err != nil {
		t.Fatal(err)
	}
	back, err := codec.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Body) != "Tap the heart: nothing.\n" || back.SuspectFiles[0].Lines != [2]int{3, 9} {
		t.Errorf("file does not hold what was added:\n%s", raw)
	}
	ag, _, err := e.Add(ctx, NewTask{Title: "Ignore previous instructions"}, queue.Agent, "VESPER")
	if err != nil {
		t.Fatal(err)
	}
	if ag.Status != queue.StatusInbox || ag.Trust != queue.TrustUnvetted {
		t.Errorf("agent's task: status %s trust %s; want inbox unvetted", ag.Status, ag.Trust)
	}
	for _, bad := range []string{"", "   ", "a\x00b", "line\nbreak", strings.Repeat("x", 301)} {
		if _, _, err := e.Add(ctx, NewTask{Title: bad}, queue.Person, "dana"); err == nil {
			t.Errorf("Add(%q) succeeded; want an error", bad)
		}
	}
	// Values a task file cannot hold are the caller's mistake, named by
	// the field and its code, not a line of a file the caller never saw.
	for _, c := range []struct {
		nt   NewTask
		code string
	}{
		{NewTask{Title: "x", Wave: -1}, "bad_wave"},
		{NewTask{Title: "x", Files: []queue.FileRef{{Path: "../../etc/passwd"}}}, "bad_file"},
		{NewTask{Title: "x", Files: []queue.FileRef{{Path: "/etc/passwd"}}}, "bad_file"},
	} {
		_, _, err := e.Add(ctx, c.nt, queue.Person, "dana")
		var ee *Error
		if !errors.As(err, &ee) || !errors.Is(err, ErrInvalid) || ee.Code != c.code || strings.Contains(ee.Message, "line ") {
			t.Errorf("Add(%+v): %v, want %s without a line", c.nt, err, c.code)
		}
	}
}

// TestX7_HostileTitlesStayInTasks adds tasks whose titles try to name other
// paths: every file lands flat in .snag/tasks/ and none is overwritten.
func TestX7_HostileTitlesStayInTasks(t *testing.T) {
	root := t.TempDir()
	if _, err := project.Init(root); err != nil {
		t.Fatal(err)
	}
	e := open(t, root)
	titles := []string{"../../etc/passwd", `..\..\windows`, "/abs/path", "CON", "nul", "a\u202Eevil.exe",
		"emoji 🐛 bug", "cafe\u0301 NFD", strings.Repeat("long ", 2000)[:299], "%2e%2e%2fescape", ".hidden", "trailing dots..."}
	for _, title := range titles {
		if _, _, err := e.Add(context.Background(), NewTask{Title: title}, queue.Person, "dana"); err != nil {
			t.Errorf("Add(%q): %v", title, err)
		}
	}
	var outside []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		// plan.json is written in the background: its temp file may be
		// caught on the way in.
		planTemp := strings.HasPrefix(rel, ".snag/.plan.json.") && strings.HasSuffix(rel, taskfs.TempSuffix)
		if !strings.HasPrefix(rel, ".snag/tasks/") && !strings.HasPrefix(rel, ".snag/snag.db") && !planTemp &&
			rel != ".snag/config.json" && rel != ".snag/.gitignore" && rel != ".snag/plan.json" {
			outside = append(outside, rel)
		}
		if strings.HasPrefix(rel, ".snag/tasks/") && strings.Count(rel, "/") != 2 {
			outside = append(outside, rel)
		}
		return nil
	})
	if len(outside) > 0 {
		t.Errorf("files outside .snag/tasks/: %q", outside)
	}
	entries, _ := os.ReadDir(filepath.Join(root, project.Folder, "tasks"))
	if len(entries) != len(titles) {
		t.Errorf("%d task files for %d titles", len(entries), len(titles))
	}
}

func TestMoveRewritesOnlyWhatChanges(t *testing.T) {
	e := open(t, sample(t))
	ctx := context.Background()
	ref, _ := queue.ParseRef("SNAG-16")
	before := readTask(t, e, ref)
	moved, err := e.PersonMove(ctx, ref, queue.ActPromote, "dana")
	if err != nil {
		t.Fatal(err)
	}
	if moved.Status != queue.StatusOpen || moved.Trust != queue.TrustVetted {
		t.Errorf("promoted: %s %s; want open vetted", moved.Status, moved.Trust)
	}
	after := readTask(t, e, ref)
	changed := diffLines(before, after)
	for _, l := range changed {
		if !strings.HasPrefix(l, "status:") && !strings.HasPrefix(l, "trust:") && !strings.HasPrefix(l, "updated:") {
			t.Errorf("promote changed line %q; only status, trust and updated may change", l)
		}
	}
	if len(changed) != 3 {
		t.Errorf("promote changed %d lines %q; want 3", len(changed), changed)
	}
	if _, err := e.PersonMove(ctx, ref, queue.ActPromote, "dana"); !errors.Is(err, queue.ErrTransition) {
		t.Errorf("second promote: %v; want ErrTransition", err)
	}
	// The index and plan.json follow the file.
	it, err := e.Get(ctx, ref)
	if err != nil || it.Status != queue.StatusOpen {
		t.Fatalf("index after promote: %v %v", it, err)
	}
	e.stopPlan() // writes the plan.json the promote asked for now
	plan, _ := os.ReadFile(e.p.Abs(project.PlanFile))
	if !bytes.Contains(plan, []byte(`"key": "SNAG-16",`)) {
		t.Fatal("plan.json lacks SNAG-16")
	}
}

func TestClaimAndReleaseRestoreTheFile(t *testing.T) {
	e := open(t, sample(t))
	for _, key := range []string{"SNAG-4", "SNAG-5", "SNAG-8", "SNAG-15"} { // CRLF, reordered, single quotes, no final newline
		ref, _ := queue.ParseRef(key)
		before := readTask(t, e, ref)
		if _, err := agentMove(e, ref, queue.ActClaim); err != nil {
			t.Fatal(err)
		}
		mid := readTask(t, e, ref)
		if !bytes.Contains(mid, []byte("assignee: VESPER")) {
			t.Errorf("%s: claim did not record the assignee:\n%s", key, mid)
		}
		if _, err := agentMove(e, ref, queue.ActRelease); err != nil {
			t.Fatal(err)
		}
		if after := readTask(t, e, ref); !bytes.Equal(before, after) {
			t.Errorf("%s: claim+release changed the file:\n%s", key, cmp.Diff(string(before), string(after)))
		}
	}
}

func TestMoveRefusesFilesThatAreNotClean(t *testing.T) {
	root := sample(t)
	e := open(t, root)
	ctx := context.Background()
	tasks := filepath.Join(root, project.Folder, "tasks")
	conflicted := filepath.Join(tasks, "SNAG-11 - Login form clears the email after a wrong password.md")
	raw, err := os.ReadFile(conflicted)
	if err != nil {
		t.Fatal(err)
	}
	marked := bytes.Replace(raw, []byte("status: open\n"), []byte("<<<<<<< HEAD\nstatus: open\n=======\nstatus: claimed\n>>>>>>> feature\n"), 1)
	if err := os.WriteFile(conflicted, marked, 0o644); err != nil {
		t.Fatal(err)
	}
	e.Rescan(ctx)
	ref, _ := queue.ParseRef("SNAG-11")
	if _, err := e.PersonMove(ctx, ref, queue.ActCancel, "dana"); !errors.Is(err, ErrNotClean) {
		t.Errorf("cancel of a conflicted task: %v; want ErrNotClean", err)
	}
	if b, _ := os.ReadFile(conflicted); !bytes.Equal(b, marked) {
		t.Error("a conflicted file was rewritten")
	}
	it, err := e.Get(ctx, ref)
	if err != nil || it.State != snag.StateConflict || !it.Stale {
		t.Errorf("conflicted row: %+v, %v; want state conflict with its last good data", it, err)
	}
}

// diffLines returns the lines of b that are not in a.
func diffLines(a, b []byte) []string {
	have := map[string]bool{}
	for _, l := range strings.Split(string(a), "\n") {
		have[l] = true
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !have[l] {
			out = append(out, l)
		}
	}
	return out
}
