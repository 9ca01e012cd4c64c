package queue

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// PlanStatus is where a plan stands.
type PlanStatus string

// The statuses of a plan. An agent's plan starts as a draft; only a
// person makes a plan active.
const (
	PlanDraft    PlanStatus = "draft"
	PlanActive   PlanStatus = "active"
	PlanDone     PlanStatus = "done"
	PlanArchived PlanStatus = "archived"
)

// PlanStatuses lists the statuses of a plan.
var PlanStatuses = []PlanStatus{PlanDraft, PlanActive, PlanDone, PlanArchived}

// PlansFolder is the folder of plan files, relative to .snag/.
const PlansFolder = "plans"

// PlanFile is a plan file, .snag/plans/<slug>.md: a markdown body with a
// title, a status, its trust and who wrote it. Tasks name it by its slug
// (plan: <slug>). Unknown keys are kept: snag edits plans as it edits
// tasks, line by line.
type PlanFile struct {
	Slug    string // the file's name without .md
	Title   string
	Status  PlanStatus
	Trust   Trust  // vetted unless the file says otherwise
	Author  string // the agent that wrote it, for an agent's plan
	Created time.Time
	Updated time.Time
	Body    []byte
	Raw     []byte
}

// ParsePlan reads a plan file. A file with no status is a draft; one with
// no trust was written by a person, and is vetted.
func ParsePlan(slug string, raw []byte) (*PlanFile, error) {
	doc, err := decode(raw)
	if err != nil {
		return nil, err
	}
	p := &PlanFile{Slug: slug, Status: PlanDraft, Trust: TrustVetted, Body: raw[doc.fm.bodyStart:], Raw: raw}
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
			p.Status = PlanStatus(v.Value)
			if !slices.Contains(PlanStatuses, p.Status) {
				return nil, &ParseError{Line: line, Field: k, Msg: fmt.Sprintf("unknown value %q (want one of draft, active, done, archived)", v.Value)}
			}
		case "trust":
			p.Trust = Trust(v.Value)
			if p.Trust != TrustVetted && p.Trust != TrustUnvetted {
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
func FormatPlan(p *PlanFile) []byte {
	var b bytes.Buffer
	b.WriteString("---\n")
	fmt.Fprintf(&b, "title: %s\n", quote(p.Title, 0))
	fmt.Fprintf(&b, "status: %s\n", p.Status)
	if p.Trust == TrustUnvetted {
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

// Slug is a plan's file name made from its title: lower-case letters and
// digits joined by single hyphens, at most 60 bytes ("Checkout revamp" is
// checkout-revamp).
func Slug(title string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(title) {
		switch {
		case r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		default:
			dash = true
		}
		if b.Len() >= 60 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// ValidSlug reports whether s is a plan's slug as Slug makes them.
func ValidSlug(s string) bool {
	return s != "" && len(s) <= 64 && s == Slug(s)
}
