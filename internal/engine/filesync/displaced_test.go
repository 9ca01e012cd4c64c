package filesync_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/workspace/workspacetest"
)

// claimable serves the sample project and gives
// SNAG-11, an open task an agent may claim: its ref, the path of its file
// and its bytes.
func claimable(t *testing.T) (root string, e *engine.Engine, ref queue.Ref, path string, orig []byte) {
	t.Helper()
	root = workspacetest.Sample(t)
	e, _ = serve(t, engine.Options{Root: root})
	ref, _ = queue.ParseRef("SNAG-11")
	it, err := e.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	path = e.Project().Abs(it.Path)
	orig, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return root, e, ref, path, orig
}

// claim has the agent KESTREL (a name no task of the sample holds) claim
// the task ref.
func claim(t *testing.T, e *engine.Engine, ref queue.Ref) (engine.Claimed, error) {
	t.Helper()
	ctx := context.Background()
	s, err := e.Register(ctx, index.Session{Name: "KESTREL", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return e.Claim(ctx, s, &ref, false)
}

// S7: two saves race a claim's swap. An editor saving in place writes
// into the file the swap displaces; a second save, made from the bytes
// before the claim, lands at the path before snag swaps the first back.
// The second stays in place, claimed. The first changed the line the
// second changed, so it cannot be merged: its bytes are kept in
// .snag/recovered/, whole, and the audit log names that file.
func TestS7_ASaveThatCannotBeMergedIsKeptAside(t *testing.T) {
	root, e, ref, p, orig := claimable(t)
	lines := bytes.SplitAfter(orig, []byte("\n"))
	last := lines[len(lines)-2] // the body's last line
	// The editor opened the file before the claim and writes after it:
	// its bytes land in the file the claim displaced.
	editor, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := bytes.Replace(orig, last, []byte("The editor's own ending.\n"), 1)
	var ours []byte
	written := false
	e.TaskFiles().OnStep(func(step string) error {
		if step != taskfs.StepRenamed || written {
			return nil
		}
		written = true
		if err := editor.Truncate(0); err != nil {
			return err
		}
		if _, err := editor.WriteAt(theirs, 0); err != nil {
			return err
		}
		if err := editor.Close(); err != nil {
			return err
		}
		// Meanwhile another save changed that line at the path too.
		ours = bytes.Replace(orig, last, []byte("Another ending, saved at the path.\n"), 1)
		tmp := filepath.Join(filepath.Dir(p), ".other-save")
		if err := os.WriteFile(tmp, ours, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, p)
	})
	since := e.Events().Last()
	if _, err := claim(t, e, ref); err != nil {
		t.Fatal(err)
	}
	e.TaskFiles().OnStep(nil)
	if !written {
		t.Fatal("the claim did not swap the file")
	}

	// The engine says so once the save is kept aside and audited.
	waitEvent(t, e, since, "the save kept aside", func(ev engine.Event) bool {
		te, ok := ev.Data.(snag.TaskEvent)
		return ok && te.Recovered != ""
	})
	folder := filepath.Join(root, project.Folder, project.RecoveredFolder)
	kept, _ := filepath.Glob(filepath.Join(folder, "[^.]*")) // not a temp file of one being written
	if len(kept) != 1 {
		t.Fatalf("files kept in .snag/recovered/: %q; want the editor's save", kept)
	}
	if b, _ := os.ReadFile(kept[0]); !bytes.Equal(b, theirs) {
		t.Errorf("kept aside:\n%s\nwant the editor's save:\n%s", b, theirs)
	}
	now, _ := os.ReadFile(p)
	if !bytes.Contains(now, []byte("Another ending, saved at the path.\n")) || !bytes.Contains(now, []byte("assignee: KESTREL")) {
		t.Errorf("the task file holds:\n%s\nwant the save at the path, claimed:\n%s", now, ours)
	}
	entries, err := e.AuditTail(context.Background(), 20)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(entries, func(a snag.AuditEntry) bool {
		return a.Outcome == "recovered" && bytes.Contains([]byte(a.Detail), []byte(filepath.Base(kept[0])))
	}) {
		t.Errorf("no audit entry names the kept file %s: %+v", filepath.Base(kept[0]), entries)
	}
}

// S7: a save slips in between a claim's check and its swap, so snag swaps
// it straight back into place; for that instant the file held the claim's
// bytes, and a script read them then. Its own save, made from those bytes,
// lands after the claim: it lacks the line of the save that was swapped
// back. That line is merged back in, the script's line is kept, and the
// task stays claimed.
func TestS7_ASaveMadeFromSnagsBytesBeforeTheSwapBackKeepsTheSwappedBackLine(t *testing.T) {
	root, e, ref, p, orig := claimable(t)
	save := func(b []byte) error {
		tmp := filepath.Join(filepath.Dir(p), ".a-save")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, p)
	}
	personsLine, scriptsLine := []byte("The person's line.\n"), []byte("The script's line.\n")
	// The hook is left in place (the merge that mends the file runs in the
	// background and passes through it too), but only the claim's first
	// check and swap act.
	var mu sync.Mutex
	var seen []byte // what the script read
	checks := 0
	e.TaskFiles().OnStep(func(step string) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case step == taskfs.StepChecked:
			checks++
			if checks == 1 {
				return save(append(bytes.Clone(orig), personsLine...))
			}
		case step == taskfs.StepRenamed && seen == nil:
			var err error
			seen, err = os.ReadFile(p)
			return err
		}
		return nil
	})
	if _, err := claim(t, e, ref); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	read := seen
	mu.Unlock()
	if !bytes.Contains(read, []byte("assignee: KESTREL")) || bytes.Contains(read, personsLine) {
		t.Fatalf("the script read:\n%s\nwant the claim's bytes, which the person's save was swapped back over", read)
	}
	since := e.Events().Last()
	if err := save(append(bytes.Clone(read), scriptsLine...)); err != nil {
		t.Fatal(err)
	}

	// Each merge is announced once it is in the file: wait for the one
	// that has both lines.
	var now []byte
	waitEvent(t, e, since, "a merge with both saves' lines", func(ev engine.Event) bool {
		te, ok := ev.Data.(snag.TaskEvent)
		if !ok || !te.Merged {
			return false
		}
		now, _ = os.ReadFile(p)
		return bytes.Contains(now, personsLine) && bytes.Contains(now, scriptsLine)
	})
	if !bytes.Contains(now, personsLine) || !bytes.Contains(now, scriptsLine) || !bytes.Contains(now, []byte("assignee: KESTREL")) {
		t.Errorf("the task file holds:\n%s\nwant both saves' lines, claimed", now)
	}
	if kept, _ := filepath.Glob(filepath.Join(root, project.Folder, project.RecoveredFolder, "[^.]*")); len(kept) != 0 {
		t.Errorf("kept aside: %q; want nothing (the saves merge)", kept)
	}
}

// waitEvent waits until the engine publishes an event after since that
// match accepts, for at most 20 s.
func waitEvent(t *testing.T, e *engine.Engine, since int64, what string, match func(engine.Event) bool) engine.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		evs, wait, _ := e.Events().Since(since)
		for _, ev := range evs {
			if match(ev) {
				return ev
			}
			since = ev.ID
		}
		select {
		case <-wait:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
