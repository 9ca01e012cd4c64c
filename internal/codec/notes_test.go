package codec_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// Every note of the sample parses, and a note snag writes reads back as
// it was written.
func TestNotesRoundTrip(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", ".snag-example", "notes", "*.md"))
	if len(files) == 0 {
		t.Fatal("the sample has no notes")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n, err := codec.ParseNote(raw)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if queue.NoteNum(n.Key) == 0 || n.Title == "" || len(n.Tasks) == 0 {
			t.Errorf("%s: %+v", f, n)
		}
	}
	want := &queue.Note{ID: "note_01", Key: "N-4", Title: `Cents, "always"`, Type: "decision", Trust: queue.TrustUnvetted,
		Author: "ORCA", Created: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), Tasks: []string{"SNAG-3"},
		Files: []string{"web/cart.ts", "src/a b.go"}, Body: []byte("Because.\n")}
	got, err := codec.ParseNote(codec.FormatNote(want))
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != want.Key || got.Title != want.Title || got.Type != want.Type || got.Trust != want.Trust ||
		got.Author != want.Author || !got.Created.Equal(want.Created) || !slices.Equal(got.Tasks, want.Tasks) ||
		!slices.Equal(got.Files, want.Files) || string(got.Body) != string(want.Body) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if name := queue.NoteFileName("N-4", "Cents: always"); name != "N-4 - Cents always.md" {
		t.Errorf("file name %q", name)
	}
}

// A plan snag writes reads back; slugs are made from titles.
func TestPlansRoundTrip(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", ".snag-example", "plans", "checkout-revamp.md"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := codec.ParsePlan("checkout-revamp", raw)
	if err != nil || p.Status != queue.PlanActive || p.Trust != queue.TrustVetted || p.Title != "Checkout revamp" {
		t.Fatalf("sample plan: %+v, %v", p, err)
	}
	want := &queue.PlanFile{Title: "Faster: search!", Status: queue.PlanDraft, Trust: queue.TrustUnvetted, Author: "ADA",
		Created: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), Body: []byte("Goals.\n")}
	got, err := codec.ParsePlan("x", codec.FormatPlan(want))
	if err != nil || got.Title != want.Title || got.Status != want.Status || got.Trust != want.Trust || got.Author != "ADA" {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	for title, slug := range map[string]string{"Checkout revamp": "checkout-revamp", "  Faster: search!  ": "faster-search", "Ünïcode 2": "n-code-2", "---": ""} {
		if s := queue.Slug(title); s != slug {
			t.Errorf("Slug(%q) = %q, want %q", title, s, slug)
		}
	}
	if _, err := codec.ParsePlan("x", []byte("---\ntitle: x\nstatus: opne\n---\n")); err == nil {
		t.Error("a plan with an unknown status parsed")
	}
}
