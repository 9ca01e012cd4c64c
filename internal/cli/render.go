package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/queue"
)

// Width is the widest line a table prints.
const Width = 100

// writeTable prints rows as a compact table no wider than Width: key,
// status, severity, kind, wave, and the title with flags (@holder,
// [BLOCKED by ...], [unvetted], [invalid], [stale], [duplicate]).
func writeTable(w io.Writer, rows []api.Task) {
	head := []string{"KEY", "STATUS", "SEV", "KIND", "W"}
	cols := make([][]string, len(rows))
	widths := make([]int, len(head))
	for i, h := range head {
		widths[i] = len(h)
	}
	for i := range rows {
		r := &rows[i]
		key := r.Key
		if key == "" {
			key = "?"
		}
		status := string(r.Status)
		if r.State != api.StateOK && !r.Stale {
			status = r.State
		}
		wave := strconv.Itoa(r.Wave)
		if r.ID == "" {
			wave = "-"
		}
		cols[i] = []string{safe(key), safe(status), safe(string(r.Severity)), safe(string(r.Kind)), wave}
		for j, s := range cols[i] {
			widths[j] = max(widths[j], utf8.RuneCountInString(s))
		}
	}
	used := 0
	for _, wd := range widths {
		used += wd + 2
	}
	titleWidth := max(Width-used, 20)
	line := func(cells []string, title, flags string) {
		var b strings.Builder
		for j, s := range cells {
			b.WriteString(s)
			b.WriteString(strings.Repeat(" ", widths[j]-utf8.RuneCountInString(s)+2))
		}
		// Flags matter more than the title's tail: the title gives way.
		if flags != "" {
			room := max(titleWidth-utf8.RuneCountInString(flags)-2, 12)
			title = clip(title, room) + "  " + flags
		}
		b.WriteString(clip(title, titleWidth))
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(head, "TITLE", "")
	for i := range rows {
		line(cols[i], safe(rows[i].Title), safe(flagsOf(&rows[i])))
	}
}

// flagsOf is what a table shows after a task's title.
func flagsOf(r *api.Task) string {
	var flags []string
	if r.Assignee != "" && !r.Status.Terminal() {
		flags = append(flags, "@"+r.Assignee)
	}
	if r.HeldIn != "" {
		flags = append(flags, "[in "+filepath.Base(r.HeldIn)+"]")
	}
	if r.HeldOn != "" {
		flags = append(flags, "[on "+r.HeldOn+"]")
	}
	if len(r.BlockedBy) > 0 {
		flags = append(flags, "[BLOCKED by "+strings.Join(r.BlockedBy, ", ")+"]")
	}
	if r.Trust == queue.TrustUnvetted {
		flags = append(flags, "[unvetted]")
	}
	if r.State != api.StateOK {
		if r.Key != "" {
			flags = append(flags, "["+r.State+": snag show "+r.Key+"]")
		} else {
			flags = append(flags, "["+r.State+": snag doctor]")
		}
	}
	if r.Stale {
		flags = append(flags, "[stale]")
	}
	if r.Duplicate {
		flags = append(flags, "[duplicate]")
	}
	return strings.Join(flags, " ")
}

func orKey(r *api.Task) string {
	if r.Key != "" {
		return r.Key
	}
	return "'" + r.Path + "'"
}

// clip cuts s to n characters, marking the cut with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s { // as string([]rune(s)[:n-1]), without the runes' copy
		if n--; n == 0 {
			break
		}
		b.WriteRune(r)
	}
	return b.String() + "…"
}

// writeShow prints one task in full.
func writeShow(w io.Writer, d api.TaskDetail, v *verifyAnswer) {
	if d.Task == nil {
		writeShowUnparsed(w, d)
		return
	}
	t, it := d.Task, &d.Row
	kv := func(k, v string) { writeField(w, k, v) }
	fmt.Fprintf(w, "%s  %s\n", safe(t.Key), safe(t.Title))
	kv("id", t.ID)
	kv("status", showStatus(d))
	kv("trust", string(t.Trust))
	kv("severity", showSeverity(t))
	if len(t.DependsOn) > 0 {
		kv("depends", showDepends(d))
	}
	if len(it.BlockedBy) > 0 {
		kv("blocked", "yes, by "+strings.Join(it.BlockedBy, ", "))
	}
	writeSuspectFiles(w, t.SuspectFiles)
	writeCapture(w, t.Capture)
	if t.Verify != nil {
		kv("verify", t.Verify.Command)
	}
	kv("checked", showChecked(v, t.Key))
	kv("created", fmtTime(t.Created))
	kv("updated", fmtTime(t.Updated))
	kv("file", d.TaskFile)
	if it.State != api.StateOK {
		kv("state", it.State+" (showing the last good version)")
		kv("error", it.Error)
	}
	if it.Duplicate {
		kv("warning", "another file has the same id or key: snag doctor")
	}
	if d.Body != nil {
		writeBody(w, *d.Body)
	}
}

// writeShowUnparsed prints a task file that never parsed: where it is and
// why it does not.
func writeShowUnparsed(w io.Writer, d api.TaskDetail) {
	it := &d.Row
	fmt.Fprintf(w, "%s  %s\n", safe(orKey(it)), safe(it.Path))
	fmt.Fprintf(w, "state:     %s\n", safe(it.State))
	fmt.Fprintf(w, "error:     %s\n", safe(it.Error))
	fmt.Fprintf(w, "file:      %s\n", safe(d.TaskFile))
}

// writeField prints one of show's fields, none when v is empty.
func writeField(w io.Writer, k, v string) {
	if v != "" {
		fmt.Fprintf(w, "%-10s %s\n", k+":", safe(v))
	}
}

// showStatus is a task's status as show prints it: with its assignee,
// where another worktree or clone holds it, and whether a resolved task
// was verified.
func showStatus(d api.TaskDetail) string {
	t := d.Task
	status := string(t.Status)
	if t.Assignee != "" {
		status += " (" + t.Assignee + ")"
	}
	if d.Row.HeldIn != "" {
		// Another worktree's agent holds it; this worktree's file says open.
		status = fmt.Sprintf("%s (%s), in the worktree %s; this worktree's file says %s", d.Row.Status, d.Row.Assignee, d.Row.HeldIn, t.Status)
	}
	if d.Row.HeldOn != "" {
		// Another clone's agent holds it; this clone's file says open.
		status = fmt.Sprintf("%s (%s), on %s; this clone's file says %s", d.Row.Status, d.Row.Assignee, d.Row.HeldOn, t.Status)
	}
	if t.Status == queue.StatusResolved {
		status += map[bool]string{true: ", verified", false: ", not verified"}[t.Verified]
	}
	return status
}

// showSeverity is show's line of a task's severity, kind, wave and plan.
func showSeverity(t *queue.Task) string {
	line := fmt.Sprintf("%s   kind: %s   wave: %d", t.Severity, t.Kind, t.Wave)
	if t.Plan != "" {
		line += "   plan: " + t.Plan
	}
	return line
}

// showDepends is a task's depends_on by key where the answer names them,
// each not yet resolved marked so.
func showDepends(d api.TaskDetail) string {
	t, it := d.Task, &d.Row
	deps := make([]string, len(t.DependsOn))
	for i, dep := range t.DependsOn {
		if len(d.DependsOn) == len(t.DependsOn) {
			dep = d.DependsOn[i] // by key: snag writes ids
		}
		deps[i] = dep
		for _, b := range it.BlockedBy {
			if b == dep || strings.EqualFold(b, dep) {
				deps[i] += " (not resolved)"
			}
		}
	}
	return strings.Join(deps, ", ")
}

// writeSuspectFiles prints a task's suspect files, one a line, the first
// under the field's name.
func writeSuspectFiles(w io.Writer, files []queue.FileRef) {
	for i, f := range files {
		k := ""
		if i == 0 {
			k = "files"
		}
		fmt.Fprintf(w, "%-10s %s\n", k+map[bool]string{true: ":", false: ""}[k != ""], safe(f.String()))
	}
}

// writeCapture prints what a capture tool brought with a task, if any.
func writeCapture(w io.Writer, c *queue.Capture) {
	if c == nil {
		return
	}
	writeField(w, "url", c.URL)
	writeField(w, "anchor", c.Anchor)
	for _, e := range c.ConsoleErrors {
		writeField(w, "console", e)
	}
	for _, s := range c.Screenshots {
		writeField(w, "shot", layout.Rel(s))
	}
}

// showChecked is show's line of where verify of a task stands: running,
// or its last outcome, when, and why; empty when v says neither.
func showChecked(v *verifyAnswer, key string) string {
	switch {
	case v == nil:
		return ""
	case v.Running:
		return "running now (snag verify " + key + " --wait waits for it)"
	}
	line := v.Outcome
	if line == "" {
		return ""
	}
	if !v.LastAt.IsZero() {
		line += ", " + fmtTime(v.LastAt)
	}
	if r := strings.TrimSpace(v.Reason); r != "" {
		line += ": " + firstLine(r)
	}
	return line
}

// writeBody prints a task's body after a blank line, ending it with a
// line break if it has none; nothing for an empty body.
func writeBody(w io.Writer, body string) {
	if body == "" {
		return
	}
	fmt.Fprintln(w)
	io.WriteString(w, safeText(body))
	if body[len(body)-1] != '\n' {
		fmt.Fprintln(w)
	}
}
