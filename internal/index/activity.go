package index

import (
	"context"
	"slices"
	"time"

	"github.com/snagdev/snag/internal/snag"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// activityKeep is how many keys of each kind a branch's activity lists.
const activityKeep = 5

// Activity is the activity by branch since since, the branch with the
// latest first, at most limit of them, and how many branches had any.
func (db *DB) Activity(ctx context.Context, since time.Time, limit int) ([]snag.BranchActivity, int, error) {
	by := map[string]*snag.BranchActivity{}
	get := func(b string, at time.Time) *snag.BranchActivity {
		a := by[b]
		if a == nil {
			a = &snag.BranchActivity{Branch: b}
			by[b] = a
		}
		if at.After(a.Last) {
			a.Last = at
		}
		return a
	}
	add := func(list []string, key string) []string {
		if len(list) < activityKeep && !slices.Contains(list, key) {
			return append(list, key)
		}
		return list
	}
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, bestNotes+` SELECT branch, key, created FROM best WHERE rn = 1 AND branch != ''
			AND created > :since ORDER BY created DESC, key_num DESC`, &sqlitex.ExecOptions{
			Named: map[string]any{":since": since.UnixNano()},
			ResultFunc: func(st *sqlite.Stmt) error {
				a := get(st.ColumnText(0), time.Unix(0, st.ColumnInt64(2)))
				a.Nodes = add(a.Nodes, st.ColumnText(1))
				return nil
			}})
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, `SELECT audit.branch, audit.action, audit.at, audit.agent, audit.detail,
			coalesce(nullif(tasks.key, ''), audit.task_id)
			FROM audit LEFT JOIN tasks ON tasks.id = audit.task_id AND audit.task_id != ''
			WHERE audit.branch != '' AND audit.at > :since AND audit.action IN ('claim', 'resolve', 'report', 'link')
			AND audit.outcome != 'refused'
			-- an agent's resolve hands the task to verify: it counts once the task is resolved
			AND (audit.action != 'resolve' OR tasks.status = 'resolved')
			ORDER BY audit.at DESC`, &sqlitex.ExecOptions{
			Named: map[string]any{":since": since.UnixNano()},
			ResultFunc: func(st *sqlite.Stmt) error {
				at := time.Unix(0, st.ColumnInt64(2))
				a := get(st.ColumnText(0), at)
				switch st.ColumnText(1) {
				case "claim":
					a.Claimed = add(a.Claimed, st.ColumnText(5))
				case "resolve":
					a.Resolved = add(a.Resolved, st.ColumnText(5))
				case "report":
					if a.Report == nil {
						a.Report = &snag.ActivityReport{Agent: st.ColumnText(3), Message: st.ColumnText(4), At: at}
					}
				}
				return nil
			}})
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]snag.BranchActivity, 0, len(by))
	for _, a := range by {
		out = append(out, *a)
	}
	out, total := snag.LatestBranches(out, limit)
	return out, total, nil
}
