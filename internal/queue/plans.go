package queue

import (
	"strings"
	"time"
	"unicode"
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
