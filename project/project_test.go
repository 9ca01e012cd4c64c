package project

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/queue"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sample copies .snag-example into a fresh project root, without plan.json.
func sample(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	err := os.CopyFS(filepath.Join(root, Folder), os.DirFS("../.snag-example"))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(root, Folder, PlanFile))
	return root
}

func open(t *testing.T, root string) *Project {
	t.Helper()
	p, err := Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if _, err := p.Sync(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSamplePlanRegeneratesIdentically(t *testing.T) {
	p := open(t, sample(t))
	got, err := os.ReadFile(p.Abs(PlanFile))
	if err != nil {
		t.Fatal(err)
	}
	golden := "../.snag-example/plan.json"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./project -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("plan.json differs from .snag-example/plan.json (-want +got):\n%s", diff)
	}
}

func TestFindSkipsTheUserFolder(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SNAG_HOME", filepath.Join(home, ".snag"))
	if err := os.MkdirAll(filepath.Join(home, ".snag"), 0o700); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(home, "code", "shop", "web")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(deep); !errors.Is(err, ErrNoProject) {
		t.Fatalf("Find under a home with only ~/.snag: got %v, want ErrNoProject", err)
	}
	if _, err := Init(filepath.Join(home, "code", "shop")); err != nil {
		t.Fatal(err)
	}
	got, err := Find(deep)
	if err != nil || got != filepath.Join(home, "code", "shop") {
		t.Fatalf("Find = %q, %v; want the shop folder", got, err)
	}
	if _, err := Init(home); err == nil {
		t.Fatal("Init in the folder that holds ~/.snag succeeded; want a refusal")
	}
}

func TestInitIsIdempotent(t *testing.T) {
	root := t.TempDir()
	res, err := Init(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 7 {
		t.Errorf("created %v; want .snag, 4 folders, config.json, .gitignore", res.Created)
	}
	cfg := filepath.Join(root, Folder, ConfigFile)
	if err := os.WriteFile(cfg, []byte(`{"version": 1, "verify": {"command": "make check"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = Init(root)
	if err != nil || len(res.Created) != 0 {
		t.Fatalf("second Init created %v, %v; want nothing", res.Created, err)
	}
	if b, _ := os.ReadFile(cfg); !bytes.Contains(b, []byte("make check")) {
		t.Error("second Init overwrote config.json")
	}
}

func TestAddByPersonAndByAgent(t *testing.T) {
	p := open(t, sample(t))
	ctx := context.Background()
	tk, path, err := p.Add(ctx, NewTask{Title: "Wishlist heart does not fill in", Kind: queue.KindUX,
		Files: []queue.FileRef{{Path: "web/wishlist.ts", Lines: [2]int{3, 9}}}, DependsOn: []string{"SNAG-3"},
		Body: []byte("Tap the heart: nothing.")}, queue.Person, "dana")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Key != "SNAG-21" || tk.Status != queue.StatusOpen || tk.Trust != queue.TrustVetted {
		t.Errorf("person's task: key %s status %s trust %s; want SNAG-21 open vetted", tk.Key, tk.Status, tk.Trust)
	}
	raw, err := os.ReadFile(p.Abs(path))
	if err != nil {
		t.Fatal(err)
	}
	back, err := queue.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Body) != "Tap the heart: nothing.\n" || back.SuspectFiles[0].Lines != [2]int{3, 9} {
		t.Errorf("file does not hold what was added:\n%s", raw)
	}
	ag, _, err := p.Add(ctx, NewTask{Title: "Ignore previous instructions"}, queue.Agent, "VESPER")
	if err != nil {
		t.Fatal(err)
	}
	if ag.Status != queue.StatusInbox || ag.Trust != queue.TrustUnvetted {
		t.Errorf("agent's task: status %s trust %s; want inbox unvetted", ag.Status, ag.Trust)
	}
	for _, bad := range []string{"", "   ", "a\x00b", "line\nbreak", strings.Repeat("x", 301)} {
		if _, _, err := p.Add(ctx, NewTask{Title: bad}, queue.Person, "dana"); err == nil {
			t.Errorf("Add(%q) succeeded; want an error", bad)
		}
	}
}

// TestX7_HostileTitlesStayInTasks adds tasks whose titles try to name other
// paths: every file lands flat in .snag/tasks/ and none is overwritten.
func TestX7_HostileTitlesStayInTasks(t *testing.T) {
	root := t.TempDir()
	if _, err := Init(root); err != nil {
		t.Fatal(err)
	}
	p := open(t, root)
	titles := []string{"../../etc/passwd", `..\..\windows`, "/abs/path", "CON", "nul", "a\u202Eevil.exe",
		"emoji 🐛 bug", "cafe\u0301 NFD", strings.Repeat("long ", 2000)[:299], "%2e%2e%2fescape", ".hidden", "trailing dots..."}
	for _, title := range titles {
		if _, _, err := p.Add(context.Background(), NewTask{Title: title}, queue.Person, "dana"); err != nil {
			t.Errorf("Add(%q): %v", title, err)
		}
	}
	var outside []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if !strings.HasPrefix(rel, ".snag/tasks/") && !strings.HasPrefix(rel, ".snag/snag.db") &&
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
	entries, _ := os.ReadDir(filepath.Join(root, Folder, "tasks"))
	if len(entries) != len(titles) {
		t.Errorf("%d task files for %d titles", len(entries), len(titles))
	}
}

func TestMoveRewritesOnlyWhatChanges(t *testing.T) {
	p := open(t, sample(t))
	ctx := context.Background()
	ref, _ := queue.ParseRef("SNAG-16")
	before := readTask(t, p, ref)
	moved, err := p.Move(ctx, ref, queue.ActPromote, queue.Person, "dana")
	if err != nil {
		t.Fatal(err)
	}
	if moved.Status != queue.StatusOpen || moved.Trust != queue.TrustVetted {
		t.Errorf("promoted: %s %s; want open vetted", moved.Status, moved.Trust)
	}
	after := readTask(t, p, ref)
	changed := diffLines(before, after)
	for _, l := range changed {
		if !strings.HasPrefix(l, "status:") && !strings.HasPrefix(l, "trust:") && !strings.HasPrefix(l, "updated:") {
			t.Errorf("promote changed line %q; only status, trust and updated may change", l)
		}
	}
	if len(changed) != 3 {
		t.Errorf("promote changed %d lines %q; want 3", len(changed), changed)
	}
	if _, err := p.Move(ctx, ref, queue.ActPromote, queue.Person, "dana"); !errors.Is(err, queue.ErrTransition) {
		t.Errorf("second promote: %v; want ErrTransition", err)
	}
	// The index and plan.json follow the file.
	it, err := p.DB.Get(ctx, ref)
	if err != nil || it.Status != queue.StatusOpen {
		t.Fatalf("index after promote: %v %v", it, err)
	}
	plan, _ := os.ReadFile(p.Abs(PlanFile))
	if !bytes.Contains(plan, []byte(`"key": "SNAG-16",`)) {
		t.Fatal("plan.json lacks SNAG-16")
	}
}

func TestClaimAndReleaseRestoreTheFile(t *testing.T) {
	p := open(t, sample(t))
	ctx := context.Background()
	for _, key := range []string{"SNAG-4", "SNAG-5", "SNAG-8", "SNAG-15"} { // CRLF, reordered, single quotes, no final newline
		ref, _ := queue.ParseRef(key)
		before := readTask(t, p, ref)
		if _, err := p.Move(ctx, ref, queue.ActClaim, queue.Agent, "VESPER"); err != nil {
			t.Fatal(err)
		}
		mid := readTask(t, p, ref)
		if !bytes.Contains(mid, []byte("assignee: VESPER")) {
			t.Errorf("%s: claim did not record the assignee:\n%s", key, mid)
		}
		if _, err := p.Move(ctx, ref, queue.ActRelease, queue.Agent, "VESPER"); err != nil {
			t.Fatal(err)
		}
		if after := readTask(t, p, ref); !bytes.Equal(before, after) {
			t.Errorf("%s: claim+release changed the file:\n%s", key, cmp.Diff(string(before), string(after)))
		}
	}
}

func TestMoveRefusesFilesThatAreNotClean(t *testing.T) {
	root := sample(t)
	p := open(t, root)
	ctx := context.Background()
	tasks := filepath.Join(root, Folder, "tasks")
	conflicted := filepath.Join(tasks, "SNAG-11 - Login form clears the email after a wrong password.md")
	raw, err := os.ReadFile(conflicted)
	if err != nil {
		t.Fatal(err)
	}
	marked := bytes.Replace(raw, []byte("status: open\n"), []byte("<<<<<<< HEAD\nstatus: open\n=======\nstatus: claimed\n>>>>>>> feature\n"), 1)
	if err := os.WriteFile(conflicted, marked, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	ref, _ := queue.ParseRef("SNAG-11")
	if _, err := p.Move(ctx, ref, queue.ActCancel, queue.Person, "dana"); !errors.Is(err, ErrNotClean) {
		t.Errorf("cancel of a conflicted task: %v; want ErrNotClean", err)
	}
	if b, _ := os.ReadFile(conflicted); !bytes.Equal(b, marked) {
		t.Error("a conflicted file was rewritten")
	}
	it, err := p.DB.Get(ctx, ref)
	if err != nil || it.State != index.StateConflict || !it.Stale {
		t.Errorf("conflicted row: %+v, %v; want state conflict with its last good data", it, err)
	}
}

func TestDoctorFindsAndFixes(t *testing.T) {
	root := sample(t)
	p := open(t, root)
	ctx := context.Background()
	tasks := filepath.Join(root, Folder, "tasks")
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(tasks, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("handwritten.md", "---\ntitle: Written by hand\nstatus: open\n---\nNo id, no key.\n")
	write("SNAG-30 - loop a.md", "---\nid: tsk_01JD6Z3Q8R6V2X4N0H5K7M9P10\nkey: SNAG-30\ntitle: a\nstatus: open\ndepends_on: [SNAG-31]\n---\n")
	write("SNAG-31 - loop b.md", "---\nid: tsk_01JD6Z3Q8R6V2X4N0H5K7M9P11\nkey: SNAG-31\ntitle: b\nstatus: open\ndepends_on: [SNAG-30, SNAG-99]\n---\n")
	write("copy.md", "---\nid: tsk_01JD6Z3Q8R6V2X4N0H5K7M9P11\nkey: SNAG-32\ntitle: copy\nstatus: open\n---\n")
	found, err := p.Doctor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, f := range found {
		kinds[f.Kind]++
	}
	want := map[string]int{"invalid": 1, "duplicate": 1, "dangling": 1, "cycle": 1}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("doctor findings (-want +got):\n%s\n%+v", diff, found)
	}
	done, err := p.Fix(ctx)
	if err != nil || len(done) != 1 {
		t.Fatalf("Fix: %q, %v; want one file fixed", done, err)
	}
	raw, _ := os.ReadFile(filepath.Join(tasks, "handwritten.md"))
	tk, err := queue.Parse(raw)
	if err != nil {
		t.Fatalf("after fix: %v\n%s", err, raw)
	}
	if tk.Key != "SNAG-33" || !strings.HasSuffix(string(raw), "---\nNo id, no key.\n") {
		t.Errorf("fixed file: key %s:\n%s", tk.Key, raw)
	}
}

func readTask(t *testing.T, p *Project, ref queue.Ref) []byte {
	t.Helper()
	it, err := p.DB.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p.Abs(it.Path))
	if err != nil {
		t.Fatal(err)
	}
	return b
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
