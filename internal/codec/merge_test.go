package codec_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/codec"
)

func TestMerge(t *testing.T) {
	base := "---\nid: x\nstatus: open\ntitle: T\n---\nBody.\n"
	for _, tc := range []struct {
		name, ours, theirs, want string
		err                      error
	}{
		{"a line appended onto a claim",
			"---\nid: x\nstatus: claimed\ntitle: T\nassignee: VESPER\n---\nBody.\n",
			base + "line 1\n",
			"---\nid: x\nstatus: claimed\ntitle: T\nassignee: VESPER\n---\nBody.\nline 1\n", nil},
		{"both appended: theirs first",
			"---\nid: x\nstatus: claimed\ntitle: T\n---\nBody.\nline 2\n",
			base + "line 1\n",
			"---\nid: x\nstatus: claimed\ntitle: T\n---\nBody.\nline 1\nline 2\n", nil},
		{"both appended, one side's lines first: taken once",
			"---\nid: x\nstatus: claimed\ntitle: T\n---\nBody.\nline 1\nline 2\n",
			base + "line 1\n",
			"---\nid: x\nstatus: claimed\ntitle: T\n---\nBody.\nline 1\nline 2\n", nil},
		{"both appended, one side's lines last: taken once",
			"---\nid: x\nstatus: claimed\ntitle: T\n---\nBody.\nline 2\n",
			base + "line 1\nline 2\n",
			"---\nid: x\nstatus: claimed\ntitle: T\n---\nBody.\nline 1\nline 2\n", nil},
		{"the person's status wins",
			"---\nid: x\nstatus: claimed\ntitle: T\n---\nBody.\n",
			"---\nid: x\nstatus: cancelled\ntitle: T\n---\nBody.\n",
			"---\nid: x\nstatus: cancelled\ntitle: T\n---\nBody.\n", nil},
		{"the person's title kept with snag's status",
			"---\nid: x\nstatus: claimed\ntitle: T\n---\nBody.\n",
			"---\nid: x\nstatus: open\ntitle: New\n---\nBody.\n",
			"---\nid: x\nstatus: claimed\ntitle: New\n---\nBody.\n", nil},
		{"the same body line changed both ways",
			"---\nid: x\nstatus: open\ntitle: T\n---\nBody one.\n",
			"---\nid: x\nstatus: open\ntitle: T\n---\nBody two.\n",
			"", codec.ErrMerge},
		{"no final newline",
			base + "tail",
			base + "tail",
			base + "tail", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := codec.Merge([]byte(base), []byte(tc.ours), []byte(tc.theirs))
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v; want %v", err, tc.err)
			}
			if err == nil && string(got) != tc.want {
				t.Errorf("merged\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// Sides that differ in more lines than an edit script is worked out for
// are matched on their unique lines: nothing either side added is lost.
func TestMergeLargeInsertions(t *testing.T) {
	var base, ours, theirs strings.Builder
	head := "---\nid: x\nstatus: %s\ntitle: T\n---\n"
	fmt.Fprintf(&base, head, "open")
	fmt.Fprintf(&ours, head, "claimed")
	fmt.Fprintf(&theirs, head, "open")
	for i := range 100 {
		l := fmt.Sprintf("line %d\n\n", i)
		base.WriteString(l)
		ours.WriteString(l)
		theirs.WriteString(l)
		if i == 50 {
			for j := range 1500 {
				fmt.Fprintf(&ours, "ours %d\n", j)
			}
		}
	}
	for j := range 20 {
		fmt.Fprintf(&theirs, "theirs %d\n", j)
	}
	got, err := codec.Merge([]byte(base.String()), []byte(ours.String()), []byte(theirs.String()))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"status: claimed\n", "ours 0\n", "ours 1499\n", "theirs 0\n", "theirs 19\n", "line 99\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the merge lacks %q", want)
		}
	}
}

// A person's save made from a stale read lacks a line of the body: the
// line is kept, and a lone title edit is merged, not doubled.
func TestMergeKeepsLinesAStaleSaveLacks(t *testing.T) {
	base := "---\nid: x\nstatus: open\ntitle: T\n---\none\ntwo\n"
	ours := "---\nid: x\nstatus: claimed\ntitle: T\n---\none\ntwo\n"
	theirs := "---\nid: x\nstatus: open\ntitle: New\n---\none\nthree\n"
	got, err := codec.Merge([]byte(base), []byte(ours), []byte(theirs))
	if err != nil {
		t.Fatal(err)
	}
	want := "---\nid: x\nstatus: claimed\ntitle: New\n---\none\nthree\ntwo\n"
	if string(got) != want {
		t.Errorf("merged\n%s\nwant\n%s", got, want)
	}
}

func TestLacks(t *testing.T) {
	base := "---\nid: x\n---\nBody.\n"
	theirs := base + "line 1\nBody.\n"
	for _, tc := range []struct {
		name, cur string
		want      bool
	}{
		{"has them", "---\nid: x\nstatus: claimed\n---\nBody.\nline 1\nBody.\nline 2\n", false},
		{"lacks a new line", base + "line 2\n", true},
		{"lacks a repeat of a base line", base + "line 1\n", true},
		{"theirs is base", base, false},
		{"lacks only snag's scalars theirs held", "---\nid: x\nstatus: claimed\n---\nBody.\nline 1\nBody.\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, th := []byte(base), []byte(theirs)
			switch tc.name {
			case "theirs is base":
				th = b
			case "lacks only snag's scalars theirs held":
				th = []byte("---\nid: x\nstatus: open\n---\nBody.\nline 1\nBody.\n")
			}
			if got := codec.Lacks([]byte(tc.cur), b, th); got != tc.want {
				t.Errorf("Lacks = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestReadd: a save made from a read that missed theirs gets back only the
// lines theirs added that it lacks, where theirs has them; what it holds
// of snag's scalars and its own lines stay.
func TestReadd(t *testing.T) {
	base := "---\nid: x\nstatus: open\n---\none\ntwo\n"
	theirs := "---\nid: x\nstatus: open\n---\none\nperson\ntwo\nperson\n"
	for _, tc := range []struct{ name, cur, want string }{
		{"lacks both of its lines", "---\nid: x\nstatus: claimed\n---\none\ntwo\nscript\n",
			"---\nid: x\nstatus: claimed\n---\none\nperson\ntwo\nperson\nscript\n"},
		{"lacks one of them", "---\nid: x\nstatus: done\n---\none\nperson\ntwo\n",
			"---\nid: x\nstatus: done\n---\none\nperson\ntwo\nperson\n"},
		{"lacks none", "---\nid: x\nstatus: claimed\n---\none\nperson\ntwo\nperson\nmore\n",
			"---\nid: x\nstatus: claimed\n---\none\nperson\ntwo\nperson\nmore\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := codec.Readd([]byte(tc.cur), []byte(base), []byte(theirs))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Readd gave\n%s\nwant\n%s", got, tc.want)
			}
			if codec.Lacks(got, []byte(base), []byte(theirs)) {
				t.Error("the result still lacks a line theirs added")
			}
		})
	}
}
