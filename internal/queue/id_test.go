package queue_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/queue"
)

func TestNewID(t *testing.T) {
	form := regexp.MustCompile(`^tsk_[0-7][0-9A-HJKMNP-TV-Z]{25}$`)
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 50 {
		// Steps of a millisecond: the ULID's time part has that resolution.
		id := queue.NewID(base.Add(time.Duration(i) * time.Millisecond))
		if !form.MatchString(id) {
			t.Fatalf("NewID = %q, want tsk_ and an upper-case Crockford ULID", id)
		}
		if !queue.IsID(id) {
			t.Fatalf("IsID(%q) = false", id)
		}
		ids = append(ids, id)
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids do not sort by creation time: %v", ids)
	}
	if a, b := queue.NewID(base), queue.NewID(base); a == b {
		t.Errorf("two ids made in the same millisecond are equal: %s", a)
	}
}

func TestIsID(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1C", true},
		{"tsk_01jd6z3q8r6v2x4n0h5k7m9p1c", true},
		{"TSK_01JD6Z3Q8R6V2X4N0H5K7M9P1C", true},
		{"tsk_7ZZZZZZZZZZZZZZZZZZZZZZZZZ", true},
		{"tsk_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", false}, // overflows 128 bits
		{"tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1", false},  // 25 characters
		{"tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1CC", false},
		{"tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1U", false}, // U is not Crockford
		{"tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1!", false},
		{"note_01JD6Z3Q8R6V2X4N0H5K7M9P", false},
		{"01JD6Z3Q8R6V2X4N0H5K7M9P1C", false},
		{"SNAG-12", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := queue.IsID(tt.in); got != tt.want {
			t.Errorf("IsID(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestAlias(t *testing.T) {
	if got := queue.Alias(12); got != "SNAG-12" {
		t.Errorf("Alias(12) = %q", got)
	}
	tests := []struct {
		in   string
		want int // 0: refused
	}{
		{"SNAG-1", 1},
		{"SNAG-12", 12},
		{"snag-12", 12},
		{"Snag-4000", 4000},
		{"SNAG-0", 0},
		{"SNAG-01", 0},
		{"SNAG--1", 0},
		{"SNAG-+1", 0},
		{"SNAG-x", 0},
		{"SNAG-1x", 0},
		{"SNAG-", 0},
		{"SNAG-1 ", 0},
		{"SNAG-99999999999999999999999", 0},
		{"SNAG12", 0},
		{"TASK-12", 0},
		{"12", 0},
		{"", 0},
	}
	for _, tt := range tests {
		got, err := queue.AliasNumber(tt.in)
		if tt.want == 0 {
			if err == nil {
				t.Errorf("AliasNumber(%q) = %d, want an error", tt.in, got)
			} else if !strings.Contains(err.Error(), "SNAG-<n>") {
				t.Errorf("AliasNumber(%q) error %q does not show the form", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("AliasNumber(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseRef(t *testing.T) {
	const upper = "tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1C"
	tests := []struct {
		in   string
		want queue.Ref
	}{
		{"SNAG-12", queue.Ref{Num: 12}},
		{"snag-12", queue.Ref{Num: 12}},
		{"sNaG-12", queue.Ref{Num: 12}},
		{"12", queue.Ref{Num: 12}},
		{"  12\n", queue.Ref{Num: 12}},
		{" SNAG-3 ", queue.Ref{Num: 3}},
		{upper, queue.Ref{ID: upper}},
		{"tsk_01jd6z3q8r6v2x4n0h5k7m9p1c", queue.Ref{ID: upper}},
		{"TSK_01jd6Z3q8r6v2x4n0h5k7m9p1c", queue.Ref{ID: upper}},
	}
	for _, tt := range tests {
		got, err := queue.ParseRef(tt.in)
		if err != nil {
			t.Errorf("ParseRef(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseRef(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, in := range []string{"", "0", "012", "-3", "+3", "12a", "SNAG-0", "SNAG-01", "SNAG--1", "SNAG-x",
		"tsk_123", "../SNAG-1", strings.Repeat("9", 400), strings.Repeat("é", 400)} {
		_, err := queue.ParseRef(in)
		if err == nil {
			t.Errorf("ParseRef(%q) succeeded, want an error", in)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "SNAG-12") || !strings.Contains(msg, "snag list") || len(msg) > 250 || !utf8.ValidString(msg) {
			t.Errorf("ParseRef(%q) error does not name the fix, or quotes too much: %q", in, msg)
		}
	}
}

func TestRef_StringAndMatches(t *testing.T) {
	tk := &queue.Task{ID: testID, Key: "SNAG-7"}
	tests := []struct {
		in      string
		str     string
		matches bool
	}{
		{"snag-7", "SNAG-7", true},
		{"7", "SNAG-7", true},
		{"SNAG-8", "SNAG-8", false},
		{strings.ToLower(testID), testID, true},
		{testID2, testID2, false},
	}
	for _, tt := range tests {
		r, err := queue.ParseRef(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != tt.str || r.Matches(tk) != tt.matches {
			t.Errorf("ParseRef(%q): String() = %q, Matches = %v; want %q, %v", tt.in, r.String(), r.Matches(tk), tt.str, tt.matches)
		}
	}
}

func TestFileRef(t *testing.T) {
	tests := []struct {
		in   string
		want queue.FileRef
		str  string
	}{
		{"web/a.ts", queue.FileRef{Path: "web/a.ts"}, "web/a.ts"},
		{"web/a.ts:12", queue.FileRef{Path: "web/a.ts", Lines: [2]int{12, 12}}, "web/a.ts:12"},
		{"web/a.ts:12-40", queue.FileRef{Path: "web/a.ts", Lines: [2]int{12, 40}}, "web/a.ts:12-40"},
		{" web/a.ts:3 ", queue.FileRef{Path: "web/a.ts", Lines: [2]int{3, 3}}, "web/a.ts:3"},
		{"C:x", queue.FileRef{Path: "C:x"}, "C:x"},
		{"a:b:7", queue.FileRef{Path: "a:b", Lines: [2]int{7, 7}}, "a:b:7"},
		{"a.ts:07", queue.FileRef{Path: "a.ts:07"}, "a.ts:07"},
	}
	for _, tt := range tests {
		got, err := queue.ParseFileRef(tt.in)
		if err != nil {
			t.Errorf("ParseFileRef(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseFileRef(%q) (-want +got):\n%s", tt.in, diff)
		}
		if got.String() != tt.str {
			t.Errorf("String() = %q, want %q", got.String(), tt.str)
		}
	}
	for _, in := range []string{"", "  ", "a.ts:40-12", "a\x00b", "a\nb"} {
		if got, err := queue.ParseFileRef(in); err == nil {
			t.Errorf("ParseFileRef(%q) = %v, want an error", in, got)
		}
	}
}

const (
	testID  = "tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y"
	testID2 = "tsk_01M8QEDC00F9NK8T1KQ75MM944"
)
