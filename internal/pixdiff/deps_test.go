package pixdiff_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly keeps pixdiff a leaf: the verifier, snagd and the
// board may all use it, and it uses nothing but the standard library.
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != "github.com/snagdev/snag/internal/pixdiff" {
			t.Errorf("pixdiff depends on %s; it may use the standard library only", dep)
		}
	}
}
