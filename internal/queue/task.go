package queue

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is where a task stands in the status machine (see [Transition]).
// Blocked is not a status: it is derived from depends_on (see [Blockers]).
type Status string

// The statuses a task file may carry.
const (
	StatusInbox       Status = "inbox"
	StatusOpen        Status = "open"
	StatusClaimed     Status = "claimed"
	StatusVerifying   Status = "verifying"
	StatusNeedsReview Status = "needs_review"
	StatusResolved    Status = "resolved"
	StatusCancelled   Status = "cancelled"
)

// Statuses lists every status in the order a person reads the queue.
var Statuses = []Status{StatusInbox, StatusOpen, StatusClaimed, StatusVerifying,
	StatusNeedsReview, StatusResolved, StatusCancelled}

// Terminal reports whether s ends a task's life: resolved or cancelled.
// Lists leave terminal tasks out unless asked.
func (s Status) Terminal() bool { return s == StatusResolved || s == StatusCancelled }

// Valid reports whether s is one of [Statuses].
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Trust says who vouches for a task: a person (vetted), or nobody yet
// (unvetted: an agent or a capture added it and no person has promoted it).
type Trust string

// The trust tiers.
const (
	TrustVetted   Trust = "vetted"
	TrustUnvetted Trust = "unvetted"
)

// Trusts lists the trust tiers.
var Trusts = []Trust{TrustVetted, TrustUnvetted}

// Severity orders work within a wave: critical first.
type Severity string

// The severities, most urgent first.
const (
	SeverityCritical Severity = "critical"
	SeverityHigh     Severity = "high"
	SeverityMedium   Severity = "medium"
	SeverityLow      Severity = "low"
)

// Severities lists the severities, most urgent first.
var Severities = []Severity{SeverityCritical, SeverityHigh, SeverityMedium, SeverityLow}

// Rank is the severity's position in [Severities]: 0 for critical. An unknown
// severity ranks after low.
func (s Severity) Rank() int {
	if i := slices.Index(Severities, s); i >= 0 {
		return i
	}
	return len(Severities)
}

// Kind says what sort of work a task is.
type Kind string

// The kinds of task.
const (
	KindBug     Kind = "bug"
	KindUX      Kind = "ux"
	KindA11y    Kind = "a11y"
	KindLayout  Kind = "layout"
	KindPerf    Kind = "perf"
	KindFeature Kind = "feature"
	KindChore   Kind = "chore"
	KindNote    Kind = "note"
)

// Kinds lists the kinds of task.
var Kinds = []Kind{KindBug, KindUX, KindA11y, KindLayout, KindPerf, KindFeature, KindChore, KindNote}

// Defaults for keys a hand-written task may leave out.
const (
	DefaultSeverity = SeverityMedium
	DefaultKind     = KindBug
	DefaultWave     = 1
)

// FileRef points at a source file a task suspects, with an optional line
// range (Lines[0] == 0 when there is none; Lines[1] == Lines[0] for one line).
type FileRef struct {
	Path  string `json:"path"`
	Lines [2]int `json:"lines,omitzero"`
}

// String formats the reference as path, path:12 or path:12-40.
func (f FileRef) String() string {
	switch {
	case f.Lines[0] == 0:
		return f.Path
	case f.Lines[1] == f.Lines[0] || f.Lines[1] == 0:
		return fmt.Sprintf("%s:%d", f.Path, f.Lines[0])
	default:
		return fmt.Sprintf("%s:%d-%d", f.Path, f.Lines[0], f.Lines[1])
	}
}

// ParseFileRef reads path, path:12 or path:12-40, as a person types it on the
// command line.
func ParseFileRef(s string) (FileRef, error) {
	s = strings.TrimSpace(s)
	ref := FileRef{Path: s}
	if i := strings.LastIndexByte(s, ':'); i > 0 {
		var a, b int
		spec := s[i+1:]
		if n, _ := fmt.Sscanf(spec, "%d-%d", &a, &b); n == 2 && fmt.Sprintf("%d-%d", a, b) == spec {
			ref = FileRef{Path: s[:i], Lines: [2]int{a, b}}
		} else if n, _ := fmt.Sscanf(spec, "%d", &a); n == 1 && fmt.Sprint(a) == spec {
			ref = FileRef{Path: s[:i], Lines: [2]int{a, a}}
		}
	}
	if err := ref.Check(); err != nil {
		return FileRef{}, err
	}
	return ref, nil
}

// Check says what is wrong with a suspect file reference, or nil.
func (f FileRef) Check() error {
	switch {
	case f.Path == "":
		return fmt.Errorf("empty path (want path, path:12 or path:12-40)")
	case strings.ContainsAny(f.Path, "\x00\n\r"):
		return fmt.Errorf("path %q has a control character", f.Path)
	case f.Lines[0] < 0 || f.Lines[1] < 0:
		return fmt.Errorf("%s: line numbers must be positive", f.Path)
	case f.Lines[1] != 0 && f.Lines[1] < f.Lines[0]:
		return fmt.Errorf("%s: line range %d-%d runs backwards (want start-end)", f.Path, f.Lines[0], f.Lines[1])
	}
	return nil
}

// Capture is what a capture tool brought with a task: the page, the element a
// person pointed at, the console errors and failed requests seen, and
// screenshots (paths relative to .snag/). The browser verifier reads it to
// check the task again: it re-opens URL at Viewport, looks the anchor up by
// Anchor (else by AnchorText), and compares a fresh crop of it with Crop.
type Capture struct {
	URL       string    `json:"url,omitempty"`
	Title     string    `json:"title,omitempty"`      // the page's title
	Viewport  *Viewport `json:"viewport,omitempty"`   // the window it was seen in
	UserAgent string    `json:"user_agent,omitempty"` // the browser it was seen in
	// Anchor is the CSS selector of the element the person pointed at,
	// AnchorText its text and AnchorBox where it was, in CSS pixels of the
	// page.
	Anchor     string `json:"anchor,omitempty"`
	AnchorText string `json:"anchor_text,omitempty"`
	AnchorBox  *Box   `json:"anchor_box,omitempty"`
	// Scroll is where the page was scrolled to when the screenshot was
	// taken, in CSS pixels: the anchor is on it at AnchorBox less Scroll.
	Scroll        *Point   `json:"scroll,omitempty"`
	ConsoleErrors []string `json:"console_errors,omitempty"`
	// NetworkErrors are the requests that failed: "500 GET URL" for an
	// HTTP error, "failed GET URL: why" for one with no answer.
	NetworkErrors []string `json:"network_errors,omitempty"`
	Screenshots   []string `json:"screenshots,omitempty"`
	Crop          string   `json:"crop,omitempty"` // the anchor's pixels, as captured
}

// Viewport is a browser window's size in CSS pixels and its device scale
// factor (2 on most high-density screens).
type Viewport struct {
	Width  int     `json:"width"`
	Height int     `json:"height"`
	Scale  float64 `json:"scale,omitempty"`
}

// Point is a position in CSS pixels of the page.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Box is a rectangle in CSS pixels of the page.
type Box struct {
	X      float64 `json:"x"`
	Y      float64 `json:"y"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// Sources a task's source: key may name: what added it, when it was not a
// person or an agent's snag_add.
const (
	SourceCapture = "capture" // snag capture, the browser extension, POST /captures
)

// VerifySpec is a task's own verify step.
type VerifySpec struct {
	Command string `json:"command,omitempty"`
}

// Task is one task file, decoded. Raw holds the exact bytes it was read from;
// Body is the part after the frontmatter, a sub-slice of Raw, never
// re-rendered.
type Task struct {
	ID           string      `json:"id"`
	Key          string      `json:"key"`
	Title        string      `json:"title"`
	Status       Status      `json:"status"`
	Trust        Trust       `json:"trust"`
	Severity     Severity    `json:"severity"`
	Kind         Kind        `json:"kind"`
	Source       string      `json:"source,omitempty"`
	Wave         int         `json:"wave"`
	Plan         string      `json:"plan,omitempty"`
	Assignee     string      `json:"assignee,omitempty"`
	DependsOn    []string    `json:"depends_on,omitempty"`
	SuspectFiles []FileRef   `json:"suspect_files,omitempty"`
	Capture      *Capture    `json:"capture,omitempty"`
	Verify       *VerifySpec `json:"verify,omitempty"`
	Verified     bool        `json:"verified"`
	Created      time.Time   `json:"created,omitzero"`
	Updated      time.Time   `json:"updated,omitzero"`

	// Body is the markdown after the frontmatter, byte for byte.
	Body []byte `json:"-"`
	// Raw is the whole file as read.
	Raw []byte `json:"-"`
}

// Num is the number in the task's alias (12 for SNAG-12), or 0.
func (t *Task) Num() int {
	n, _ := AliasNumber(t.Key)
	return n
}
