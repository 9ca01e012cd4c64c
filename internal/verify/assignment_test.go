package verify

import "testing"

// TestAssignment: a leading NAME= is what a POSIX shell takes for an
// assignment (a name is a letter or _ first, then letters, digits or _).
func TestAssignment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ word, want string }{
		{"X=1", "X="}, {"_=", "_="}, {"CGO_ENABLED=0", "CGO_ENABLED="}, {"a1_b=c=d", "a1_b="},
		{"=x", ""}, {"1X=2", ""}, {"X-Y=1", ""}, {"go", ""}, {"", ""}, {"X", ""}, {"é=1", ""},
	} {
		if got := assignment(c.word); got != c.want {
			t.Errorf("assignment(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}
