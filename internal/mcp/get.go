package mcp

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type verifyOut struct {
	Running bool     `json:"running"`
	Outcome string   `json:"outcome,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	LastAt  string   `json:"last_at,omitempty"`
	Changed *float64 `json:"changed,omitempty" jsonschema:"visual verify: fraction of the element's pixels changed"`
}

type getOut struct {
	Source      string    `json:"source"`
	Note        string    `json:"note,omitempty"`
	Task        Detail    `json:"task"`
	Body        string    `json:"body"`
	BodyCut     bool      `json:"body_cut,omitempty"`
	TaskFile    string    `json:"task_file,omitempty"`
	NextActions []string  `json:"next_actions"`
	Verify      verifyOut `json:"verify"`
}

func (s *server) holds(key string) bool {
	d := s.daemon()
	return d != nil && d.Holds(key)
}

func (s *server) get(ctx context.Context, req *sdk.CallToolRequest, in idIn) (*sdk.CallToolResult, getOut, error) {
	ctx = s.begin(ctx, req, "snag_get")
	var det *Detail
	src, note, err := s.read(ctx, func(b Backend) (err error) { det, err = b.Get(ctx, in.ID); return })
	if err != nil {
		return nil, getOut{}, err
	}
	if src == SourceFiles && s.holds(det.Key) {
		// The files still say this agent holds it, but only snagd knows:
		// past its grace another agent may have it.
		note = "snagd is not answering: your lease of " + det.Key + " lasts only if snagd is back within its grace; " +
			"until snag_get answers from snagd again, do not count on the task being yours; " + note
	}
	out := getOut{Source: src, Note: note, Task: *det, Body: det.Body, NextActions: s.nextActions(det)}
	if len(out.Body) > maxBody { // the whole result stays within its budget
		out.Body, out.BodyCut = out.Body[:runeStart(out.Body, maxBody)], true
	}
	if det.Path != "" {
		out.TaskFile = ".snag/" + det.Path
	}
	out.Verify = verifyOf(det)
	var b strings.Builder
	unvetted := det.Trust != "vetted"
	writeGetHeader(&b, det, src, note)
	writeGetConsole(&b, det.ConsoleErrors, unvetted)
	writeGetVerify(&b, out.Verify)
	body, cut := getBody(det, out.TaskFile)
	out.BodyCut = out.BodyCut || cut
	if unvetted {
		body = fence(body)
	}
	b.WriteString("---\n" + body + "\n---\n")
	b.WriteString("next: " + strings.Join(out.NextActions, "; "))
	content := append(text(b.String()), s.pictureLinks(det)...)
	return &sdk.CallToolResult{Content: content}, out, nil
}

// runeStart is the largest offset at or before cut that starts a UTF-8
// character of s (0 at least).
func runeStart(s string, cut int) int {
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return cut
}

// verifyOf is where verify of a task stands, as snag_get answers it:
// snagd's latest run when there is one, else what the status says.
func verifyOf(det *Detail) verifyOut {
	switch {
	case det.Verify != nil:
		return verifyOutOf(det.Verify)
	case det.Status == "verifying":
		return verifyOut{Running: true, Outcome: "pending"}
	case det.Status == "needs_review":
		return verifyOut{Outcome: "needs_review", Reason: "verify could not decide: a person reviews it"}
	case det.Status == "resolved" && det.Verified:
		return verifyOut{Outcome: "pass"}
	case det.Status == "resolved":
		return verifyOut{Outcome: "not_verified"}
	}
	return verifyOut{}
}

// verifyOutOf is a verify run as snag_get answers it: pending while it
// runs.
func verifyOutOf(v *VerifyState) verifyOut {
	out := verifyOut{Running: v.Running, Outcome: v.Outcome, Reason: v.Reason}
	if v.Visual != nil {
		out.Changed = &v.Visual.Changed
	}
	if !v.LastAt.IsZero() {
		out.LastAt = v.LastAt.UTC().Format(time.RFC3339)
	}
	if v.Running {
		out.Outcome = "pending"
	}
	return out
}

// writeGetHeader writes snag_get's first lines: the key and title (an
// unvetted title quoted, as data), the status line, the note, and what
// blocks the task, its suspect files and its page.
func writeGetHeader(b *strings.Builder, det *Detail, src, note string) {
	if det.Trust != "vetted" { // the title, like the body, is data
		fmt.Fprintf(b, "%s [unvetted] %q\n", det.Key, oneLine(det.Title, 120))
	} else {
		fmt.Fprintf(b, "%s %s\n", det.Key, oneLine(det.Title, 120))
	}
	st := det.Status
	if det.Assignee != "" {
		st += "@" + det.Assignee
	}
	fmt.Fprintf(b, "status %s · %s %s · wave %d", st, det.Severity, det.Kind, det.Wave)
	if det.Plan != "" {
		b.WriteString(" · plan " + det.Plan)
	}
	fmt.Fprintf(b, " · trust %s · source %s\n", det.Trust, src)
	if note != "" {
		b.WriteString("note: " + note + "\n")
	}
	if len(det.BlockedBy) > 0 {
		b.WriteString("[BLOCKED] by " + strings.Join(det.BlockedBy, ", ") + "\n")
	}
	if len(det.SuspectFiles) > 0 {
		b.WriteString("files: " + strings.Join(det.SuspectFiles, ", ") + "\n")
	}
	if det.URL != "" {
		b.WriteString("url: " + det.URL)
		if det.Anchor != "" {
			b.WriteString(" at " + det.Anchor)
		}
		b.WriteString("\n")
	}
}

// writeGetConsole writes the first two console errors, quoted when
// unvetted, and counts the rest.
func writeGetConsole(b *strings.Builder, errs []string, unvetted bool) {
	for i, e := range errs {
		if i == 2 {
			fmt.Fprintf(b, "console: %d more\n", len(errs)-2)
			break
		}
		if unvetted {
			fmt.Fprintf(b, "console: %q\n", oneLine(e, 160))
		} else {
			b.WriteString("console: " + oneLine(e, 160) + "\n")
		}
	}
}

// writeGetVerify writes where verify stands, when it has an outcome: the
// end of the reason, or, while it runs, when to look again.
func writeGetVerify(b *strings.Builder, v verifyOut) {
	if v.Outcome == "" {
		return
	}
	fmt.Fprintf(b, "verify: %s", v.Outcome)
	if v.Running {
		b.WriteString(" (running: call snag_get again in a while)")
	} else if v.Reason != "" {
		b.WriteString(": " + clipLines(v.Reason, verifyReasonCut))
	}
	b.WriteString("\n")
}

// getBody is a task's body as snag_get's text shows it: past bodyCut
// bytes, cut at a line's end where one is near, saying which file to Read
// for the rest (cut true).
func getBody(det *Detail, taskFile string) (body string, cut bool) {
	body = det.Body
	if len(body) > bodyCut {
		at := bodyCut
		if i := strings.LastIndex(body[:at], "\n"); i > bodyCut/2 {
			at = i
		}
		at = runeStart(body, at)
		body = body[:at] + fmt.Sprintf("\n[cut at %d of %d bytes: Read %s for the rest]", at, len(det.Body), taskFile)
		cut = true
	}
	return strings.TrimSpace(body), cut
}

// pictureLinks link a task's pictures: by their shot resource, or, for
// one not in .snag/shots, by a file link for a client that can read files.
func (s *server) pictureLinks(det *Detail) []sdk.Content {
	var links []sdk.Content
	for _, pic := range det.Pictures() {
		uri := shotURI(pic.Path)
		if uri == "" { // not in .snag/shots: a file link, for a client that can read files
			abs := s.absShot(pic.Path)
			if abs == "" {
				continue
			}
			uri = "file://" + abs
		}
		links = append(links, &sdk.ResourceLink{URI: uri, Name: path0(pic.Path),
			MIMEType: mimeOf(pic.Path), Description: pic.What + " of " + det.Key})
	}
	return links
}

// clipLines keeps the end of s, where a command's failure is, in at most
// n bytes.
func clipLines(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut++
	}
	return "…" + s[cut:]
}

func path0(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

// nextActions is the cheap hint of which calls are worth making next.
func (s *server) nextActions(det *Detail) []string {
	q := strconv.Quote(det.Key)
	var next []string
	switch {
	case det.Problem != "":
		// No move is taken on a file that does not read: a person fixes it.
		next = append(next, "its file does not read ("+det.Problem+"): a person fixes it (snag doctor says how); no call takes it until then")
	case s.holds(det.Key):
		next = append(next, "work it, then snag_resolve {\"id\": "+q+"} or snag_release {\"id\": "+q+", \"reason\": ...}")
	case det.Status == "open" && len(det.BlockedBy) > 0:
		next = append(next, "blocked by "+strings.Join(det.BlockedBy, ", ")+": work those first, or snag_claim {\"id\": "+q+", \"force\": true}")
	case det.Status == "open":
		next = append(next, "snag_claim {\"id\": "+q+"}")
	case det.Status == "inbox":
		next = append(next, "in the inbox: a person promotes it before it can be claimed")
	}
	if len(det.SuspectFiles) > 0 {
		next = append(next, "Read "+det.SuspectFiles[0])
	}
	if pics := det.Pictures(); det.Verify != nil && det.Verify.Visual != nil && det.Verify.Visual.Diff != "" {
		next = append(next, "snag_screenshot {\"id\": "+q+", \"index\": "+strconv.Itoa(len(pics)-1)+"} shows what verify saw change")
	} else if len(det.Screenshots) > 0 {
		if slices.Contains([]string{"ux", "a11y", "layout"}, det.Kind) {
			next = append(next, "snag_screenshot {\"id\": "+q+"} to see it")
		} else {
			next = append(next, "screenshots: not needed for a "+det.Kind+" task")
		}
	}
	return next
}
