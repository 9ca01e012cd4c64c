package project

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/taskfs"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sample copies .snag-example into a fresh project root, without plan.json.
func sample(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	snagdtest.CopySample(t, root)
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
	golden := "../../.snag-example/plan.json"
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
	tk, err := codec.Parse(raw)
	if err != nil {
		t.Fatalf("after fix: %v\n%s", err, raw)
	}
	if tk.Key != "SNAG-33" || !strings.HasSuffix(string(raw), "---\nNo id, no key.\n") {
		t.Errorf("fixed file: key %s:\n%s", tk.Key, raw)
	}
}

// TestFixKeepsASaveLeftInATempFile: doctor --fix removes old temp files,
// but one that holds a person's save (it landed in the file a rewrite
// displaced, and snagd died before merging it back) is kept in
// .snag/recovered/, and Fix says where.
func TestFixKeepsASaveLeftInATempFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI runs on Linux, where a swap is an atomic exchange; this is %s", runtime.GOOS)
		}
		t.Skip("a swap displaces the file only where it is an atomic exchange (Linux)")
	}
	root := sample(t)
	p := open(t, root)
	const name = "SNAG-11 - Login form clears the email after a wrong password.md"
	crash := errors.New("crash")
	p.Tasks.OnStep(func(step string) error {
		if step == taskfs.StepRenamed {
			return crash // as a SIGKILL right after the swap
		}
		return nil
	})
	if _, _, err := p.Tasks.Update(name, func(b []byte) ([]byte, error) { return append(b, "snag's line\n"...), nil }); !errors.Is(err, crash) {
		t.Fatalf("Update: %v; want the step's error", err)
	}
	p.Tasks.OnStep(nil)
	temps, _ := filepath.Glob(filepath.Join(root, Folder, "tasks", ".*"+taskfs.TempSuffix))
	if len(temps) != 1 {
		t.Fatalf("temp files: %q; want the displaced one", temps)
	}
	f, err := os.OpenFile(temps[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("a person's line\n")
	f.Close()
	old := time.Now().Add(-time.Hour)
	os.Chtimes(temps[0], old, old)
	want, _ := os.ReadFile(temps[0])

	done, err := p.Fix(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := filepath.Glob(filepath.Join(root, Folder, RecoveredFolder, "[^.]*"))
	if len(kept) != 1 {
		t.Fatalf("kept in .snag/recovered/: %q; want the person's save (Fix said %q)", kept, done)
	}
	if b, _ := os.ReadFile(kept[0]); !bytes.Equal(b, want) {
		t.Errorf("%s holds %q; want the displaced file with the person's line", kept[0], b)
	}
	if len(done) != 1 || !strings.Contains(done[0], filepath.Base(kept[0])) {
		t.Errorf("Fix said %q; want one line naming the kept file", done)
	}
	if _, err := os.Stat(temps[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temp file is still there: %v", err)
	}
}

// TestOpenReaderBuildsItsCacheAndWritesThePlan reads a project with no
// private index yet, whose plan.json is out of date: the reader builds its
// index from the files (index.Build), and the plan it writes is the files'
// even though the sync after the build finds nothing new.
func TestOpenReaderBuildsItsCacheAndWritesThePlan(t *testing.T) {
	ctx := context.Background()
	root := sample(t)
	t.Setenv(CacheEnv, t.TempDir())
	stale := []byte(`{"version":1,"tasks":[]}` + "\n")
	if err := os.WriteFile(filepath.Join(root, Folder, PlanFile), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := OpenReader(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := os.ReadFile(p.Abs(PlanFile))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../.snag-example/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("plan.json after a first read without snagd is not the files' plan:\n%s", cmp.Diff(string(want), string(got)))
	}
	n, err := p.DB.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Tasks == 0 {
		t.Error("the reader's index is empty")
	}
}

// snag doctor reads the notes too: a note that does not parse, a key two
// notes share, a note with no key, a link to a note on no branch, and a
// cycle of took_from links are each found, naming the file and the fix;
// the sample's notes alone are clean.
func TestDoctorFindsNoteProblems(t *testing.T) {
	root := sample(t)
	p := open(t, root)
	ctx := context.Background()
	found, err := p.Doctor(ctx)
	if err != nil || len(found) != 0 {
		t.Fatalf("the sample: %+v, %v", found, err)
	}
	notes := filepath.Join(root, Folder, queue.NotesFolder)
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(notes, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("N-20 - broken.md", "---\nkey: N-20\ntitle: Broken\ntype: rumour\n---\n")
	write("N-21 - twice.md", "---\nid: note_A\nkey: N-21\ntitle: One\ntype: decision\ncreated: 2026-12-01T10:00:00Z\n---\n")
	write("N-21 - again.md", "---\nid: note_B\nkey: N-21\ntitle: Two\ntype: decision\ncreated: 2026-12-02T10:00:00Z\n---\n")
	write("N-22 - dangling.md", "---\nkey: N-22\ntitle: Borrowed\ntype: observation\nlinks:\n  - {to: N-99, kind: took_from}\n---\n")
	write("N-23 - loop a.md", "---\nkey: N-23\ntitle: A\ntype: option\nlinks:\n  - {to: N-24, kind: took_from}\n---\n")
	write("N-25 - keyless.md", "---\ntitle: No key\ntype: question\n---\n")
	write("N-24 - loop b.md", "---\nkey: N-24\ntitle: B\ntype: option\nlinks:\n  - {to: N-23, kind: took_from, why: \"each from the other\"}\n  - {to: N-23, kind: relates}\n---\n")
	found, err = p.Doctor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, f := range found {
		kinds[f.Kind]++
		if !strings.HasPrefix(f.Path, "notes/N-2") || f.Message == "" {
			t.Errorf("a finding without its note file or message: %+v", f)
		}
	}
	want := map[string]int{"invalid": 2, "duplicate": 1, "dangling": 1, "cycle": 1}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("doctor findings (-want +got):\n%s\n%+v", diff, found)
	}
	for _, f := range found {
		switch f.Kind {
		case "cycle":
			if !strings.Contains(f.Message, "N-23 -> N-24 -> N-23") || !strings.Contains(f.Message, "relates") {
				t.Errorf("the cycle finding: %s", f.Message)
			}
		case "duplicate":
			if !strings.Contains(f.Message, "N-21 is the key of 2 notes") {
				t.Errorf("the duplicate finding: %s", f.Message)
			}
		case "invalid":
			if !strings.Contains(f.Message, "rumour") && !strings.Contains(f.Message, `"No key" has no key`) {
				t.Errorf("the invalid finding: %s", f.Message)
			}
		}
	}
}

// TestDoctorSweepsEveryFolderSnagWrites: a temp file a crash left in
// tasks/, plans/ or notes/ (where plans and notes are written whole through
// one) is found, named in its folder, and removed by Fix.
func TestDoctorSweepsEveryFolderSnagWrites(t *testing.T) {
	root := sample(t)
	p := open(t, root)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	var want []string
	for _, folder := range []string{"tasks", "plans", "notes"} {
		name := ".left by a crash.md.123456" + taskfs.TempSuffix
		path := filepath.Join(root, Folder, folder, name)
		if err := os.WriteFile(path, []byte("half a file"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
		want = append(want, folder+"/"+name)
	}
	found, err := p.Doctor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var temps []string
	for _, f := range found {
		if f.Kind == "temp" {
			temps = append(temps, f.Path)
		}
	}
	slices.Sort(temps)
	slices.Sort(want)
	if diff := cmp.Diff(want, temps); diff != "" {
		t.Errorf("temp findings (-want +got):\n%s", diff)
	}
	if _, err := p.Fix(ctx); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if _, err := os.Stat(filepath.Join(root, Folder, w)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there after Fix: %v", w, err)
		}
	}
}
