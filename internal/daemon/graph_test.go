package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	daemonpkg "github.com/snagdev/snag/internal/daemon"
)

// noteFiles lists the note files of a project's own worktree.
func noteFiles(t *testing.T, root string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, ".snag", "notes", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// graphLinks is GET /graph's edges, as "FROM kind TO".
func graphLinks(d *daemon) []string {
	var g struct {
		Links []struct{ From, To, Kind string }
	}
	d.get("/graph", &g)
	var out []string
	for _, l := range g.Links {
		out = append(out, l.From+" "+l.Kind+" "+l.To)
	}
	return out
}

// A note and its edges are one: when indexing the new note fails (a
// failpoint between the file and its index), neither the file nor any
// edge is left; when snagd dies there instead, the restart finds the
// note with its edge, both. The next note is written whole.
func TestNoteAndEdgeAreOne(t *testing.T) {
	for _, c := range []struct {
		action string
		kept   bool
	}{{"eio", false}, {"kill", true}} {
		t.Run(c.action, func(t *testing.T) {
			t.Parallel()
			root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
			d := crSpawn(t, root, home, daemonpkg.FailpointEnv+"=note:note-written="+c.action)
			before := noteFiles(t, root)
			edges := graphLinks(d)
			note := map[string]any{"title": "Borrowed the cents rule", "type": "observation", "took_from": "N-1",
				"why": "integer cents", "by": "dana"}
			code := personPost(d, "/notes", note)
			if c.action == "kill" {
				if code != 0 {
					t.Fatalf("the note answered %d though snagd died", code)
				}
				crKilled(t, d, "note:note-written")
				d = startDaemon(t, root, home)
			} else if code < 500 {
				t.Fatalf("the note answered %d though its indexing failed", code)
			}
			after := noteFiles(t, root)
			var took []string
			for _, l := range graphLinks(d) {
				if strings.HasSuffix(l, " took_from N-1") && !strings.Contains(strings.Join(edges, "\n"), l) {
					took = append(took, l)
				}
			}
			switch {
			case c.kept && (len(after) != len(before)+1 || len(took) != 1):
				t.Fatalf("after the kill: %d new files, new edges %v; want the note and its edge", len(after)-len(before), took)
			case !c.kept && (len(after) != len(before) || len(took) != 0):
				t.Fatalf("after the failure: %d new files, new edges %v; want neither", len(after)-len(before), took)
			}
			var n struct{ Key string }
			if code := d.do("POST", "/notes", map[string]any{"title": "The note after", "took_from": "N-1", "by": "dana"}, &n); code != 201 {
				t.Fatalf("the next note: %d", code)
			}
			if _, err := os.Stat(filepath.Join(root, ".snag", "notes", n.Key+" - The note after.md")); err != nil {
				t.Errorf("the next note's file: %v", err)
			}
		})
	}
}
