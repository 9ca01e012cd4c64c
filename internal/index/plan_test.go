package index

import (
	"path/filepath"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/queue"
)

// queryPlan returns the lines of EXPLAIN QUERY PLAN for q.
func queryPlan(t *testing.T, db *DB, q string, args map[string]any) []string {
	t.Helper()
	var plan []string
	err := db.withConn(t.Context(), func(conn *sqlite.Conn) error {
		return sqlitex.ExecuteTransient(conn, `EXPLAIN QUERY PLAN `+q, &sqlitex.ExecOptions{
			Named: args,
			ResultFunc: func(s *sqlite.Stmt) error {
				plan = append(plan, s.ColumnText(3))
				return nil
			},
		})
	})
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	return plan
}

// scansTable reports whether a plan reads the whole tasks table.
func scansTable(plan []string) bool {
	for _, line := range plan {
		if line == "SCAN tasks" {
			return true
		}
	}
	return false
}

// TestListWalksAnIndexInQueueOrder checks that every list reads its rows
// in queue order from an index, seeking to the cursor, and sorts at most
// the few rows of each arm of a list over several statuses.
func TestListWalksAnIndexInQueueOrder(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "snag.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	after := cursor{Wave: 2, Sev: 1, Created: 1e18, ID: "tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y", N: 7}
	tests := []struct {
		name   string
		f      Filter
		c      cursor
		index  string // every arm searches this index
		arms   int
		sorted bool // the arms' rows are merged with a (small) sort
	}{
		{"default", Filter{}, cursor{}, "tasks_order (terminal=?)", 1, false},
		{"default, page 2", Filter{}, after, "tasks_order (terminal=? AND (wave,sev_rank,created,id)>(?,?,?,?))", 1, false},
		{"wave", Filter{Wave: 3}, cursor{}, "tasks_order (terminal=? AND wave=?)", 1, false},
		{"kind and plan, page 2", Filter{Kind: queue.KindBug, Plan: "p"}, after, "tasks_order (terminal=? AND (wave,sev_rank,created,id)>(?,?,?,?))", 1, false},
		{"one status", Filter{Statuses: []queue.Status{queue.StatusOpen}}, cursor{}, "tasks_status (status=?)", 1, false},
		{"one status, page 2", Filter{Statuses: []queue.Status{queue.StatusOpen}}, after, "tasks_status (status=? AND (wave,sev_rank,created,id)>(?,?,?,?))", 1, false},
		{"two statuses, page 2", Filter{Statuses: []queue.Status{queue.StatusOpen, queue.StatusClaimed}}, after, "tasks_status (status=? AND (wave,sev_rank,created,id)>(?,?,?,?))", 2, true},
		{"all", Filter{All: true}, cursor{}, "tasks_order (terminal=?)", 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, args := listQuery(tt.f, tt.c, 21)
			plan := queryPlan(t, db, q, args)
			text := strings.Join(plan, "\n")
			if n := strings.Count(text, "SEARCH tasks USING INDEX "+tt.index); n != tt.arms {
				t.Errorf("%d arms search %s, want %d; plan:\n%s", n, tt.index, tt.arms, text)
			}
			if scansTable(plan) {
				t.Errorf("the list scans the table; plan:\n%s", text)
			}
			if sorts := strings.Contains(text, "TEMP B-TREE"); sorts != tt.sorted {
				t.Errorf("sorts = %v, want %v; plan:\n%s", sorts, tt.sorted, text)
			}
		})
	}
}

// TestReadyRowsWalkTheirIndex checks that the publication's list of ready
// tasks walks tasks_ready in order, reading no task's row and sorting
// nothing.
func TestReadyRowsWalkTheirIndex(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "snag.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	text := strings.Join(queryPlan(t, db, readyRowsQuery, nil), "\n")
	if !strings.Contains(text, "SCAN tasks USING COVERING INDEX tasks_ready") || strings.Contains(text, "TEMP B-TREE") {
		t.Errorf("plan does not walk tasks_ready alone, in order:\n%s", text)
	}
}

// TestDependencyLookupsUseTheirIndexes checks that finding whether a
// dependency is resolved looks it up by id and by alias, not by walking
// every resolved task.
func TestDependencyLookupsUseTheirIndexes(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "snag.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for name, q := range map[string]string{
		"blockers": `SELECT d.ref FROM deps d WHERE d.task_n = 1 AND NOT ` + depResolved,
		"next":     `SELECT n FROM tasks WHERE ` + readyWhere + ` ORDER BY wave, sev_rank, created, id LIMIT 1`,
	} {
		text := strings.Join(queryPlan(t, db, q, nil), "\n")
		for _, want := range []string{"SEARCH u USING INDEX tasks_id (id=?)", "SEARCH u USING INDEX tasks_key (key=?)"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: plan lacks %q:\n%s", name, want, text)
			}
		}
		if strings.Contains(text, "SEARCH u USING INDEX tasks_status") {
			t.Errorf("%s: a dependency is looked up among all resolved tasks:\n%s", name, text)
		}
	}
}

// TestLookupsUseTheirIndexes checks the plans of the small lookups a
// daemon makes often.
func TestLookupsUseTheirIndexes(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "snag.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tt := range []struct{ q, want string }{
		{`SELECT max(key_num) FROM tasks`, "tasks_key_num"},
		{`SELECT path FROM tasks WHERE state != 'ok' OR dup = 1 ORDER BY path`, "tasks_problems"},
		{`SELECT count(*) FROM tasks WHERE state != 'ok' OR dup = 1`, "tasks_problems"},
		{`SELECT n FROM tasks WHERE key = 'SNAG-4' OR (key = '' AND key_num = 4)`, "tasks_key"},
		{`SELECT n FROM tasks WHERE id = 'x'`, "tasks_id"},
		{`SELECT n FROM tasks WHERE path = 'tasks/x.md'`, "sqlite_autoindex_tasks_1"},
	} {
		plan := queryPlan(t, db, tt.q, nil)
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, tt.want) || scansTable(plan) {
			t.Errorf("%s: plan does not use %s:\n%s", tt.q, tt.want, text)
		}
	}
}
