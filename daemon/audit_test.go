package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snagdev/snag/queue"
)

// auditEntry is one entry of snag log --json.
type auditEntry struct {
	Actor, Agent, Action, Outcome, Detail string
	TaskID                                string `json:"task_id"`
}

func (d *daemon) logEntries() []auditEntry {
	d.t.Helper()
	out := d.mustSnag("log", "--json", "--limit", "1000")
	var es []auditEntry
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e auditEntry
		if line == "" || json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		es = append(es, e)
	}
	return es
}

// TestAuditHandEdits: a person's edit of a task file is in snag log, as an
// edit by the file naming the fields it changed; snag's own write (a
// claim) is logged once, as the claim; a batch of many files (a git
// checkout, a script) is one entry that counts them.
func TestAuditHandEdits(t *testing.T) {
	root := sampleProject(t)
	d := startDaemon(t, root, "")
	p := filepath.Join(root, samplePath)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := queue.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(raw, []byte("title: "+tk.Title), []byte("title: Login form forgets the email"), 1)
	edited = bytes.Replace(edited, []byte("severity: "+string(tk.Severity)), []byte("severity: critical"), 1)
	if err := os.WriteFile(p, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	var edit auditEntry
	eventually(t, "the hand edit in snag log", func() bool {
		for _, e := range d.logEntries() {
			if e.Action == "edit" && e.TaskID == tk.ID {
				edit = e
				return true
			}
		}
		return false
	})
	if edit.Actor != "person" || edit.Agent != "the file" || !strings.Contains(edit.Detail, "title "+tk.Title+" -> Login form forgets the email") ||
		!strings.Contains(edit.Detail, "severity "+string(tk.Severity)+" -> critical") {
		t.Errorf("the hand edit's entry: %+v; want an edit by the file naming title and severity", edit)
	}

	a := startAgent(t, d, "")
	a.claim("SNAG-11")
	eventually(t, "the claim in snag log", func() bool {
		for _, e := range d.logEntries() {
			if e.Action == "claim" && e.TaskID == tk.ID && e.Outcome == "ok" {
				return true
			}
		}
		return false
	})
	// A later hand edit is seen after snag's write would have been.
	other := filepath.Join(root, ".snag", "tasks", "SNAG-90 - marker.md")
	if err := os.WriteFile(other, queue.Format(genTask(90, "marker")), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the marker file in snag log", func() bool {
		for _, e := range d.logEntries() {
			if e.Action == "edit" && strings.Contains(e.Detail, "SNAG-90 - marker.md") {
				return true
			}
		}
		return false
	})
	edits := 0
	for _, e := range d.logEntries() {
		if e.Action == "edit" && e.TaskID == tk.ID {
			edits++
		}
	}
	if edits != 1 {
		t.Errorf("%d edit entries for SNAG-11; want 1 (the claim's own write is not a person's edit)", edits)
	}

	// Many files at once (as a git checkout brings them): one entry.
	stage := filepath.Join(root, "stage")
	os.Mkdir(stage, 0o755)
	w := taskWriter{t, stage}
	var names []string
	for n := 100; n < 300; n++ {
		tk := genTask(n, fmt.Sprintf("Bulk %d", n))
		w.write(tk)
		names = append(names, queue.FileName(tk.Key, tk.Title))
	}
	for _, name := range names {
		mustRename(t, filepath.Join(stage, name), filepath.Join(root, ".snag", "tasks", name))
	}
	eventually(t, "the bulk change in snag log", func() bool {
		for _, e := range d.logEntries() {
			if e.Action == "edit" && strings.Contains(e.Detail, "files changed together") {
				return true
			}
		}
		return false
	})
	bulk := 0
	for _, e := range d.logEntries() {
		if e.Action == "edit" && strings.Contains(e.Detail, "Bulk") {
			bulk++
		}
	}
	if bulk > 64 {
		t.Errorf("%d entries for 200 files written at once; want them summed up", bulk)
	}
}
