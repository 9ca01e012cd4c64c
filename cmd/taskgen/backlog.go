package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskgen"
)

// backlogStatus maps snag's statuses onto Backlog.md's default three.
var backlogStatus = map[queue.Status]string{
	queue.StatusInbox:       "To Do",
	queue.StatusOpen:        "To Do",
	queue.StatusClaimed:     "In Progress",
	queue.StatusVerifying:   "In Progress",
	queue.StatusNeedsReview: "In Progress",
	queue.StatusResolved:    "Done",
	queue.StatusCancelled:   "Done",
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// writeBacklog writes the same n tasks as taskgen.Write, in Backlog.md's
// format (backlog/tasks/task-N - Title.md, YAML frontmatter and a
// description section), for benchmarking snag against it on equal data.
func writeBacklog(dir string, n int, seed int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	i := 0
	for t := range taskgen.Tasks(n, seed) {
		i++
		name := fmt.Sprintf("task-%d - %s.md", i, strings.Trim(unsafeName.ReplaceAllString(t.Title, "-"), "-"))
		var b strings.Builder
		fmt.Fprintf(&b, "---\nid: TASK-%d\ntitle: %s\nstatus: %s\n", i, strconv.Quote(t.Title), backlogStatus[t.Status])
		if t.Assignee != "" {
			fmt.Fprintf(&b, "assignee:\n  - %s\n", t.Assignee)
		} else {
			b.WriteString("assignee: []\n")
		}
		fmt.Fprintf(&b, "created_date: '%s'\nlabels:\n  - %s\n", t.Created.UTC().Format("2006-01-02 15:04"), t.Kind)
		if len(t.DependsOn) == 0 {
			b.WriteString("dependencies: []\n")
		} else {
			b.WriteString("dependencies:\n")
			for _, d := range t.DependsOn {
				num := strings.TrimPrefix(d, queue.AliasPrefix)
				fmt.Fprintf(&b, "  - TASK-%s\n", num)
			}
		}
		fmt.Fprintf(&b, "priority: %s\nordinal: %d\n---\n\n## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\n%s\n<!-- SECTION:DESCRIPTION:END -->\n",
			backlogPriority(t.Severity), i*1000, strings.TrimSpace(string(t.Body)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func backlogPriority(s queue.Severity) string {
	switch s {
	case queue.SeverityCritical, queue.SeverityHigh:
		return "high"
	case queue.SeverityLow:
		return "low"
	}
	return "medium"
}
