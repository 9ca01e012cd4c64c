package taskgen_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskgen"
)

func TestWriteFilesParseBackToTheGeneratedTasks(t *testing.T) {
	const n = 300
	dir := filepath.Join(t.TempDir(), "tasks")
	if err := taskgen.Write(dir, n, 7); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != n {
		t.Fatalf("Write(%d) wrote %d files", n, len(entries))
	}
	statuses := map[queue.Status]int{}
	severities := map[queue.Severity]int{}
	kinds := map[queue.Kind]int{}
	waves := map[int]int{}
	deps, captures, consoles, files := 0, 0, 0, 0
	i := 0
	for want := range taskgen.Tasks(n, 7) {
		i++
		name := queue.FileName(want.Key, want.Title)
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		got, err := codec.Parse(raw)
		if err != nil {
			t.Fatalf("%s does not parse: %v", name, err)
		}
		if !bytes.Equal(codec.Format(got), raw) { // cheap; the diff says what differs
			diff := cmp.Diff(want, got, cmpopts.IgnoreFields(queue.Task{}, "Raw"), cmpopts.EquateEmpty())
			t.Fatalf("%s parses to another task (-generated +parsed):\n%s", name, diff)
		}
		if got.Key != queue.Alias(i) {
			t.Errorf("task %d has key %s", i, got.Key)
		}
		if !queue.IsID(got.ID) {
			t.Errorf("%s: id %q is not an id", name, got.ID)
		}
		if l := len(got.Body); l < 200 || l > 8<<10 {
			t.Errorf("%s: body is %d bytes, want a few hundred to a few KB", name, l)
		}
		for _, d := range got.DependsOn {
			if k, _ := queue.AliasNumber(d); k <= 0 || k >= i {
				t.Errorf("%s depends on %s, not on an earlier task", name, d)
			}
		}
		if got.Status == queue.StatusInbox && got.Trust != queue.TrustUnvetted {
			t.Errorf("%s is in the inbox but %s", name, got.Trust)
		}
		if got.Status == queue.StatusClaimed && got.Assignee == "" {
			t.Errorf("%s is claimed by nobody", name)
		}
		statuses[got.Status]++
		severities[got.Severity]++
		kinds[got.Kind]++
		waves[got.Wave]++
		if len(got.DependsOn) > 0 {
			deps++
		}
		if got.Capture != nil {
			captures++
			if len(got.Capture.ConsoleErrors) > 0 {
				consoles++
			}
		}
		if len(got.SuspectFiles) > 0 {
			files++
		}
	}
	for _, s := range []queue.Status{queue.StatusOpen, queue.StatusClaimed, queue.StatusResolved, queue.StatusInbox, queue.StatusCancelled} {
		if statuses[s] == 0 {
			t.Errorf("no task is %s: %v", s, statuses)
		}
	}
	if statuses[queue.StatusOpen] < n/3 {
		t.Errorf("only %d of %d tasks are open, want most", statuses[queue.StatusOpen], n)
	}
	if len(severities) != len(queue.Severities) || len(kinds) < 6 || len(waves) != 5 {
		t.Errorf("too little variety: severities %v, kinds %v, waves %v", severities, kinds, waves)
	}
	between := func(what string, got, lo, hi int) {
		t.Helper()
		if got < lo || got > hi {
			t.Errorf("%d of %d tasks have %s, want %d to %d", got, n, what, lo, hi)
		}
	}
	between("depends_on", deps, n/20, n/5)
	between("a capture", captures, n/10, n*3/10)
	between("console errors", consoles, captures, captures)
	between("suspect files", files, n/2, n)
}

func TestWriteIsDeterministic(t *testing.T) {
	read := func(dir string) map[string]string {
		t.Helper()
		out := map[string]string{}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = string(b)
		}
		return out
	}
	base := t.TempDir()
	for _, name := range []string{"a", "b", "c"} {
		seed := int64(1)
		if name == "c" {
			seed = 2
		}
		if err := taskgen.Write(filepath.Join(base, name), 50, seed); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := read(filepath.Join(base, "a")), read(filepath.Join(base, "b")), read(filepath.Join(base, "c"))
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("the same seed wrote different files (-first +second):\n%s", diff)
	}
	if cmp.Equal(a, c) {
		t.Error("seeds 1 and 2 wrote the same files")
	}
}

func TestWriteNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	var first *queue.Task
	for t := range taskgen.Tasks(1, 3) {
		first = t
	}
	name := filepath.Join(dir, queue.FileName(first.Key, first.Title))
	if err := os.WriteFile(name, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := taskgen.Write(dir, 3, 3)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Write over an existing file: err = %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(name); string(b) != "mine" {
		t.Errorf("Write replaced an existing file with %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("Write left %d files, want the 2 new ones beside the existing one", len(entries))
	}
}

func TestRareWordsAreRare(t *testing.T) {
	const n = 10_000
	hits := 0
	for task := range taskgen.Tasks(n, 1) {
		for _, w := range taskgen.RareWords {
			if strings.Contains(string(task.Body), w) {
				hits++
			}
		}
	}
	// One in 50,000 per word, 16 words: about 3 in 10,000 tasks (the seed
	// makes the count the same every run).
	if hits == 0 || hits > 15 {
		t.Errorf("%d rare-word uses in %d tasks, want a handful", hits, n)
	}
}
