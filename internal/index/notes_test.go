package index_test

import (
	"context"
	"fmt"
	"github.com/snagdev/snag/internal/index"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Notes are read from their folder on demand: new, changed and removed
// files are seen, search finds words of titles and bodies, and a file that
// does not parse keeps a row with its error, left out of the lists.
func TestSyncAndSearchNotes(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(t.TempDir(), "notes")
	os.MkdirAll(dir, 0o755)
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("N-1 - Cents.md", "---\nkey: N-1\ntitle: Money is integer cents\nkind: decision\ncreated: 2026-11-04T17:30:00Z\n---\nDiscounts round once.\n")
	write("N-2 - Broken.md", "---\nkey: [\n---\n")
	if _, err := e.db.SyncNotes(e.ctx, []index.NoteTree{{Dir: dir}}); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]int{"cents": 1, "discounts round": 1, "disc": 1, "nothing": 0} {
		hits, err := e.db.SearchNotes(e.ctx, q, 10)
		if err != nil || len(hits) != want {
			t.Errorf("search %q: %d hits, %v; want %d", q, len(hits), err, want)
		}
	}
	write("N-1 - Cents.md", "---\nkey: N-1\ntitle: Money is integer pennies\nkind: decision\n---\nx\n")
	os.Chtimes(filepath.Join(dir, "N-1 - Cents.md"), futureish(), futureish())
	if _, err := e.db.SyncNotes(e.ctx, []index.NoteTree{{Dir: dir}}); err != nil {
		t.Fatal(err)
	}
	if hits, _ := e.db.SearchNotes(e.ctx, "pennies", 10); len(hits) != 1 {
		t.Errorf("a changed note is not found by its new words: %v", hits)
	}
	if hits, _ := e.db.SearchNotes(e.ctx, "cents", 10); len(hits) != 0 {
		t.Errorf("a changed note is still found by its old words: %v", hits)
	}
	ns, err := e.db.Notes(e.ctx, index.NoteFilter{Limit: 10})
	if err != nil || len(ns) != 1 {
		t.Errorf("notes: %v, %v (the broken one is left out)", ns, err)
	}
	os.Remove(filepath.Join(dir, "N-1 - Cents.md"))
	e.db.SyncNotes(e.ctx, []index.NoteTree{{Dir: dir}})
	// The broken N-2 still holds its key, by its file name: a new note
	// never takes the key of one a person is mending.
	if n, _ := e.db.NextNoteKey(e.ctx); n != 3 {
		t.Errorf("next note key after the removal: %d, want 3", n)
	}
}

func futureish() time.Time { return time.Now().Add(time.Hour) }

// BenchmarkSyncNotesUnchanged is what a search pays to see the notes
// folder when nothing changed in it: a listing, a stat per note, a query.
func BenchmarkSyncNotesUnchanged(b *testing.B) {
	for _, n := range []int{3, 300} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "notes")
			os.MkdirAll(dir, 0o755)
			for i := range n {
				body := fmt.Sprintf("---\nkey: N-%d\ntitle: Note %d\nkind: decision\n---\nWhy %d.\n", i+1, i+1, i)
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("N-%d - Note.md", i+1)), []byte(body), 0o644)
			}
			db := openDB(b, filepath.Join(b.TempDir(), "snag.db"))
			ctx := context.Background()
			if _, err := db.SyncNotes(ctx, []index.NoteTree{{Dir: dir}}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := db.SyncNotes(ctx, []index.NoteTree{{Dir: dir}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
