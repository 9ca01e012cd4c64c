package codec

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/queue"
	"go.yaml.in/yaml/v3"
)

// ParsePlan reads a plan file. A file with no status is a draft; one with
// no trust was written by a person, and is vetted.
func ParsePlan(slug string, raw []byte) (*queue.PlanFile, error) {
	doc, err := decode(raw)
	if err != nil {
		return nil, err
	}
	p := &queue.PlanFile{Slug: slug, Status: queue.PlanDraft, Trust: queue.TrustVetted, Body: raw[doc.fm.bodyStart:], Raw: raw}
	if doc.root == nil {
		return nil, &ParseError{Field: "title", Msg: "missing: a plan needs a title line"}
	}
	for i := 0; i+1 < len(doc.root.Content); i += 2 {
		k, v := doc.root.Content[i].Value, doc.root.Content[i+1]
		line := v.Line + doc.lineOff
		if v.Kind != yaml.ScalarNode {
			if slices.Contains([]string{"title", "status", "trust", "author", "created", "updated"}, k) {
				return nil, &ParseError{Line: line, Field: k, Msg: "want a single value"}
			}
			continue
		}
		switch k {
		case "title":
			p.Title = v.Value
		case "status":
			p.Status = queue.PlanStatus(v.Value)
			if !slices.Contains(queue.PlanStatuses, p.Status) {
				return nil, &ParseError{Line: line, Field: k, Msg: fmt.Sprintf("unknown value %q (want one of draft, active, done, archived)", v.Value)}
			}
		case "trust":
			p.Trust = queue.Trust(v.Value)
			if p.Trust != queue.TrustVetted && p.Trust != queue.TrustUnvetted {
				return nil, &ParseError{Line: line, Field: k, Msg: fmt.Sprintf("unknown value %q (want vetted or unvetted)", v.Value)}
			}
		case "author":
			p.Author = v.Value
		case "created", "updated":
			t, err := time.Parse(time.RFC3339, v.Value)
			if err != nil {
				return nil, &ParseError{Line: line, Field: k, Msg: "want a time like 2026-12-03T10:00:00Z"}
			}
			if k == "created" {
				p.Created = t
			} else {
				p.Updated = t
			}
		}
	}
	if strings.TrimSpace(p.Title) == "" {
		return nil, &ParseError{Field: "title", Msg: "missing: a plan needs a title line"}
	}
	return p, nil
}

// FormatPlan writes a new plan file.
func FormatPlan(p *queue.PlanFile) []byte {
	var b bytes.Buffer
	b.WriteString("---\n")
	fmt.Fprintf(&b, "title: %s\n", quote(p.Title, 0))
	fmt.Fprintf(&b, "status: %s\n", p.Status)
	if p.Trust == queue.TrustUnvetted {
		fmt.Fprintf(&b, "trust: %s\n", p.Trust)
	}
	if p.Author != "" {
		fmt.Fprintf(&b, "author: %s\n", quote(p.Author, 0))
	}
	fmt.Fprintf(&b, "created: %s\n", p.Created.UTC().Format(time.RFC3339))
	b.WriteString("---\n")
	b.Write(p.Body)
	if len(p.Body) > 0 && !bytes.HasSuffix(p.Body, []byte("\n")) {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// WithBody returns raw, a file with frontmatter, with its body replaced;
// the frontmatter stays byte for byte.
func WithBody(raw, body []byte) ([]byte, error) {
	fm, err := split(raw)
	if err != nil {
		return nil, err
	}
	out := append(slices.Clip(raw[:fm.bodyStart]), body...)
	if len(body) > 0 && !bytes.HasSuffix(body, []byte("\n")) {
		out = append(out, '\n')
	}
	return out, nil
}
