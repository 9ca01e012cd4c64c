package cli

import (
	"strings"
	"testing"
)

// TestSummariesStartWithASentence: the line snag help lists for each
// command is a whole sentence, not one cut where its paragraph wraps.
func TestSummariesStartWithASentence(t *testing.T) {
	for name, c := range commands {
		line := firstLine(c.summary)
		if !strings.HasSuffix(line, ".") && !strings.HasSuffix(line, ")") {
			t.Errorf("snag %s: the summary's first line stops mid-sentence: %q", name, line)
		}
	}
}
