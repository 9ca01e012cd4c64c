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
	it := &d.Row
	if d.Task == nil {
		fmt.Fprintf(w, "%s  %s\n", safe(orKey(it)), safe(it.Path))
		fmt.Fprintf(w, "state:     %s\n", safe(it.State))
		fmt.Fprintf(w, "error:     %s\n", safe(it.Error))
		fmt.Fprintf(w, "file:      %s\n", safe(d.TaskFile))
		return
	}
	t := d.Task
	fmt.Fprintf(w, "%s  %s\n", safe(t.Key), safe(t.Title))
	kv := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-10s %s\n", k+":", safe(v))
		}
	}
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
	kv("id", t.ID)
	kv("status", status)
	kv("trust", string(t.Trust))
	line := fmt.Sprintf("%s   kind: %s   wave: %d", t.Severity, t.Kind, t.Wave)
	if t.Plan != "" {
		line += "   plan: " + t.Plan
	}
	kv("severity", line)
	if len(t.DependsOn) > 0 {
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
		kv("depends", strings.Join(deps, ", "))
	}
	if len(it.BlockedBy) > 0 {
		kv("blocked", "yes, by "+strings.Join(it.BlockedBy, ", "))
	}
	for i, f := range t.SuspectFiles {
		k := ""
		if i == 0 {
			k = "files"
		}
		fmt.Fprintf(w, "%-10s %s\n", k+map[bool]string{true: ":", false: ""}[k != ""], safe(f.String()))
	}
	if c := t.Capture; c != nil {
		kv("url", c.URL)
		kv("anchor", c.Anchor)
		for _, e := range c.ConsoleErrors {
			kv("console", e)
		}
		for _, s := range c.Screenshots {
			kv("shot", layout.Rel(s))
		}
	}
	if t.Verify != nil {
		kv("verify", t.Verify.Command)
	}
	if v != nil {
		switch {
		case v.Running:
			kv("checked", "running now (snag verify "+t.Key+" --wait waits for it)")
		case v.Outcome != "":
			line := v.Outcome
			if !v.LastAt.IsZero() {
				line += ", " + fmtTime(v.LastAt)
			}
			if r := strings.TrimSpace(v.Reason); r != "" {
				line += ": " + firstLine(r)
			}
			kv("checked", line)
		}
	}
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
	if d.Body != nil && len(*d.Body) > 0 {
		body := *d.Body
		fmt.Fprintln(w)
		io.WriteString(w, safeText(body))
		if body[len(body)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
}
