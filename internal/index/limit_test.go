package index

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLimitsStayPrepared holds the package's SQL to LIMIT +:name: a LIMIT
// of a bare bound parameter makes SQLite prepare the statement again each
// time it is bound (see listOrder's comment).
func TestLimitsStayPrepared(t *testing.T) {
	bare := regexp.MustCompile(`\b(LIMIT|OFFSET)\s+:[a-z]`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if bare.MatchString(line) {
				t.Errorf("%s:%d: %s: write LIMIT +:name, so the cached statement is not prepared again at each call", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
