package queue_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskgen"
)

// TestX7_HostileTitles: whatever the title, FileName gives one plain name in
// the flat tasks/ folder, ending in .md, with no separator or control
// character, and a title part of at most MaxTitleBytes.
func TestX7_HostileTitles(t *testing.T) {
	for _, tt := range taskgen.HostileTitles {
		t.Run(tt.Name, func(t *testing.T) {
			safe := queue.SafeTitle(tt.Title)
			name := queue.FileName("SNAG-12", tt.Title)
			if name != "SNAG-12 - "+safe+".md" {
				t.Errorf("FileName = %q, want SNAG-12 - %s.md", name, safe)
			}
			if safe == "" || len(safe) > queue.MaxTitleBytes {
				t.Errorf("SafeTitle = %q (%d bytes), want 1 to %d bytes", safe, len(safe), queue.MaxTitleBytes)
			}
			if !utf8.ValidString(name) {
				t.Errorf("FileName = %q is not valid UTF-8", name)
			}
			if strings.ContainsAny(safe, "/\\:*?\"<>|\x00") {
				t.Errorf("SafeTitle = %q keeps a reserved character", safe)
			}
			for _, r := range name {
				if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || (unicode.IsSpace(r) && r != ' ') {
					t.Errorf("FileName = %q keeps %U", name, r)
				}
			}
			if strings.HasPrefix(safe, ".") || strings.HasPrefix(safe, " ") ||
				strings.HasSuffix(safe, ".") || strings.HasSuffix(safe, " ") || strings.Contains(safe, "  ") {
				t.Errorf("SafeTitle = %q has leading dots, trailing dots or spaces, or a run of spaces", safe)
			}
			if err := queue.CheckName(name); err != nil {
				t.Errorf("CheckName(%q): %v", name, err)
			}
			if !queue.IsTaskFileName(name) {
				t.Errorf("IsTaskFileName(%q) = false", name)
			}
			if queue.SafeTitle(safe) != safe {
				t.Errorf("SafeTitle is not stable: %q then %q", safe, queue.SafeTitle(safe))
			}
		})
	}
}

func TestSafeTitle(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Checkout button does nothing on Safari", "Checkout button does nothing on Safari"},
		{"Price shows € twice on the basket page", "Price shows € twice on the basket page"},
		{"  a   b\t\tc  ", "a b c"},
		{"../../etc/passwd", "etc passwd"},
		{`..\..\x`, "x"},
		{"a: b?", "a b"},
		{"v1.2.", "v1.2"},
		{"", "untitled"},
		{"...", "untitled"},
		{`<>:"/\|?*`, "untitled"},
		{"invoice \u202egnp.exe", "invoice gnp.exe"},
		{strings.Repeat("é", 100), strings.Repeat("é", 40)},
		{strings.Repeat("ab ", 40), strings.TrimSpace(strings.Repeat("ab ", 27))},
	}
	for _, tt := range tests {
		if got := queue.SafeTitle(tt.in); got != tt.want {
			t.Errorf("SafeTitle(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"SNAG-1 - x.md", "x.md", "a b.md", "#x.md", "x.md___jb_tmp___.md"} {
		if err := queue.CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	tests := []struct{ in, want string }{
		{"", "empty"},
		{".", "empty"},
		{"..", "empty"},
		{"../x.md", "path separator"},
		{"tasks/x.md", "path separator"},
		{`a\x.md`, "path separator"},
		{"x\x00.md", "path separator"},
		{".x.md", "hidden"},
		{"x.txt", "does not end in .md"},
		{"x.md.swp", "does not end in .md"},
		{"x.MD", "does not end in .md"},
	}
	for _, tt := range tests {
		err := queue.CheckName(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckName(%q) = %v, want an error saying %q", tt.in, err, tt.want)
		}
	}
}

// TestIsTaskFileName: editor droppings and snag's temp files are never read
// as tasks (TESTPLAN harness: vim, JetBrains, emacs, VS Code).
func TestIsTaskFileName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"SNAG-12 - Checkout button does nothing.md", true},
		{"notes.md", true},
		{".SNAG-12 - x.md.swp", false},                   // vim swap
		{"4913", false},                                  // vim's write probe
		{"SNAG-12 - x.md~", false},                       // vim and emacs backup
		{"#SNAG-12 - x.md#", false},                      // emacs autosave
		{".#SNAG-12 - x.md", false},                      // emacs lock
		{"#SNAG-12 - x.md", false},                       // emacs autosave, cut short
		{"SNAG-12 - x.md___jb_tmp___", false},            // JetBrains
		{"SNAG-12 - x.md___jb_old___", false},            // JetBrains
		{"SNAG-12 - x___jb_tmp___.md", false},            // JetBrains, however it is cut
		{".SNAG-12 - x.md.0a1b2c3d4e5f.snag-tmp", false}, // snag's own temp file
		{"SNAG-12 - x.md.snag-tmp", false},
		{"SNAG-12 - x.txt", false},
		{".hidden.md", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := queue.IsTaskFileName(tt.name); got != tt.want {
			t.Errorf("IsTaskFileName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly ten", 11, "exactly ten"},
		{"a longer line", 8, "a lon…"},
		{"héllo wörld", 7, "hél…"}, // é is 2 bytes: 7-3 leaves 4, "hél"
		{"日本語のテキスト", 8, "日…"},      // each 3 bytes: the cut backs off to a boundary
	} {
		if got := queue.Clip(c.in, c.n); got != c.want || len(got) > max(c.n, len(c.in)) {
			t.Errorf("queue.Clip(%q, %d) = %q; want %q", c.in, c.n, got, c.want)
		}
	}
}
