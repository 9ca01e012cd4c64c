package codec

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/queue"
)

// Format renders a new task file: the frontmatter in snag's key order, then
// the body. Empty optional fields are left out. The result parses back to
// the same task (a fuzz test holds Format and Parse to that).
func Format(t *queue.Task) []byte {
	var b bytes.Buffer
	b.WriteString("---\n")
	kv := func(k string, v any) { fmt.Fprintf(&b, "%s: %s\n", k, render(v, 0)) }
	kv("id", t.ID)
	kv("key", t.Key)
	kv("title", t.Title)
	kv("status", string(t.Status))
	kv("trust", string(t.Trust))
	kv("severity", string(t.Severity))
	kv("kind", string(t.Kind))
	if t.Source != "" {
		kv("source", t.Source)
	}
	kv("wave", t.Wave)
	if t.Plan != "" {
		kv("plan", t.Plan)
	}
	if t.Assignee != "" {
		kv("assignee", t.Assignee)
	}
	if len(t.DependsOn) > 0 {
		fmt.Fprintf(&b, "depends_on: %s\n", flowList(t.DependsOn))
	}
	if len(t.SuspectFiles) > 0 {
		b.WriteString("suspect_files:\n")
		for _, f := range t.SuspectFiles {
			if f.Lines[0] > 0 {
				fmt.Fprintf(&b, "  - {path: %s, lines: [%d, %d]}\n", flowScalar(f.Path), f.Lines[0], max(f.Lines[0], f.Lines[1]))
			} else {
				fmt.Fprintf(&b, "  - {path: %s}\n", flowScalar(f.Path))
			}
		}
	}
	if c := t.Capture; c != nil {
		b.WriteString("capture:\n")
		str := func(k, v string) {
			if v != "" {
				fmt.Fprintf(&b, "  %s: %s\n", k, quoteAlways(v))
			}
		}
		list := func(k string, vs []string) {
			if len(vs) > 0 {
				fmt.Fprintf(&b, "  %s:\n", k)
				for _, v := range vs {
					fmt.Fprintf(&b, "    - %s\n", quoteAlways(v))
				}
			}
		}
		str("url", c.URL)
		str("title", c.Title)
		if v := c.Viewport; v != nil {
			scale := v.Scale
			if scale == 0 {
				scale = 1
			}
			fmt.Fprintf(&b, "  viewport: {width: %d, height: %d, scale: %s}\n", v.Width, v.Height, number(scale))
		}
		str("user_agent", c.UserAgent)
		str("anchor", c.Anchor)
		str("anchor_text", c.AnchorText)
		if x := c.AnchorBox; x != nil {
			fmt.Fprintf(&b, "  anchor_box: {x: %s, y: %s, width: %s, height: %s}\n", number(x.X), number(x.Y), number(x.Width), number(x.Height))
		}
		if p := c.Scroll; p != nil {
			fmt.Fprintf(&b, "  scroll: {x: %s, y: %s}\n", number(p.X), number(p.Y))
		}
		list("console_errors", c.ConsoleErrors)
		list("network_errors", c.NetworkErrors)
		if len(c.Screenshots) > 0 {
			fmt.Fprintf(&b, "  screenshots: %s\n", flowList(c.Screenshots))
		}
		if c.Crop != "" {
			fmt.Fprintf(&b, "  crop: %s\n", flowScalar(c.Crop))
		}
	}
	if t.Verify != nil && t.Verify.Command != "" {
		fmt.Fprintf(&b, "verify: {command: %s}\n", quoteAlways(t.Verify.Command))
	}
	if t.Verified {
		kv("verified", true)
	}
	if !t.Created.IsZero() {
		kv("created", t.Created.UTC().Truncate(time.Second))
	}
	if !t.Updated.IsZero() {
		kv("updated", t.Updated.UTC().Truncate(time.Second))
	}
	b.WriteString("---\n")
	b.Write(t.Body)
	return b.Bytes()
}

// number renders f as YAML reads it back: a whole number without a
// point, else the shortest decimal that is f.
func number(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func flowList(items []string) string {
	parts := make([]string, len(items))
	for i, s := range items {
		parts[i] = flowScalar(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// flowFiles renders suspect files as one [flow, list] of {path, lines}
// mappings: what Edit writes when a person replaces the list.
func flowFiles(files []queue.FileRef) string {
	parts := make([]string, len(files))
	for i, f := range files {
		if f.Lines[0] > 0 {
			parts[i] = fmt.Sprintf("{path: %s, lines: [%d, %d]}", flowScalar(f.Path), f.Lines[0], max(f.Lines[0], f.Lines[1]))
		} else {
			parts[i] = fmt.Sprintf("{path: %s}", flowScalar(f.Path))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// flowScalar renders s for a [flow, list] or {flow: mapping}, where a comma
// or a bracket would end a plain scalar.
func flowScalar(s string) string {
	if plainSafe(s) && !strings.ContainsAny(s, ",[]{}") {
		return s
	}
	return quoteAlways(s)
}

func quoteAlways(s string) string { return quote(s, 0) }
