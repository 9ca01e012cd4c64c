package index

import (
	"context"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// VerifyRun is one check of a resolved task by a verifier: queued when the
// task goes to verifying, started when a verifier takes it, ended with its
// outcome.
type VerifyRun struct {
	ID        int64     `json:"id"`
	TaskID    string    `json:"task_id"`
	Queued    time.Time `json:"queued"`
	Started   time.Time `json:"started,omitzero"`
	Ended     time.Time `json:"ended,omitzero"`
	Verifier  string    `json:"verifier"`          // command | browser
	Command   string    `json:"command,omitempty"` // the command line, or the URL the browser opens
	Dir       string    `json:"dir,omitempty"`     // where a command runs
	SessionID int64     `json:"session_id,omitempty"`
	Holder    string    `json:"holder,omitempty"`
	Outcome   string    `json:"outcome,omitempty"` // pass | fail | inconclusive | needs_approval | interrupted | ...
	Reason    string    `json:"reason,omitempty"`
	Shot      string    `json:"shot,omitempty"` // a screenshot the run took, relative to .snag/
	// Visual is the visual verify's comparison, when one ran.
	Visual *Visual `json:"visual,omitempty"`
}

// Visual is a visual verify's comparison of the anchor's crop as captured
// (Before) with the crop taken again (After): Diff pictures what changed,
// Changed is the fraction of the anchor's pixels that did, and Identical
// says the two look the same (pixdiff's rule). Paths are relative to
// .snag/.
type Visual struct {
	Before    string  `json:"before"`
	After     string  `json:"after"`
	Diff      string  `json:"diff,omitempty"`
	Changed   float64 `json:"changed"`
	Identical bool    `json:"identical"`
}

// RunEnd is how a run ended: its outcome, why, a screenshot it took, and
// its visual comparison, if one ran.
type RunEnd struct {
	Outcome, Reason, Shot string
	Visual                *Visual
}

const runColumns = `id, task_id, queued, coalesce(started, 0), coalesce(ended, 0), verifier, command, dir,
	coalesce(session_id, 0), holder, outcome, reason, shot, before_shot, after_shot, diff_shot, changed, identical`

func scanRun(st *sqlite.Stmt) VerifyRun {
	r := VerifyRun{ID: st.ColumnInt64(0), TaskID: st.ColumnText(1), Queued: time.Unix(0, st.ColumnInt64(2)),
		Verifier: st.ColumnText(5), Command: st.ColumnText(6), Dir: st.ColumnText(7), SessionID: st.ColumnInt64(8),
		Holder: st.ColumnText(9), Outcome: st.ColumnText(10), Reason: st.ColumnText(11), Shot: st.ColumnText(12)}
	if st.ColumnType(16) != sqlite.TypeNull {
		r.Visual = &Visual{Before: st.ColumnText(13), After: st.ColumnText(14), Diff: st.ColumnText(15),
			Changed: st.ColumnFloat(16), Identical: st.ColumnBool(17)}
	}
	if n := st.ColumnInt64(3); n != 0 {
		r.Started = time.Unix(0, n)
	}
	if n := st.ColumnInt64(4); n != 0 {
		r.Ended = time.Unix(0, n)
	}
	return r
}

func nullable(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

// QueueVerify records a new run, queued now, and returns it with its id.
func (tx *Tx) QueueVerify(r VerifyRun) (VerifyRun, error) {
	r.Queued = time.Now()
	err := sqlitex.Execute(tx.conn, `INSERT INTO verify_runs (task_id, queued, verifier, command, dir, session_id, holder)
		VALUES (:t, :q, :v, :c, :d, :s, :h)`, &sqlitex.ExecOptions{Named: map[string]any{
		":t": r.TaskID, ":q": r.Queued.UnixNano(), ":v": r.Verifier, ":c": r.Command, ":d": r.Dir,
		":s": nullable(r.SessionID), ":h": r.Holder}})
	if err != nil {
		return VerifyRun{}, err
	}
	r.ID = tx.conn.LastInsertRowID()
	return r, nil
}

// EndVerify ends a run with its outcome.
func (tx *Tx) EndVerify(id int64, end RunEnd) error {
	args := map[string]any{":now": time.Now().UnixNano(), ":o": end.Outcome, ":r": end.Reason, ":s": end.Shot, ":id": id,
		":b": "", ":a": "", ":d": "", ":c": nil, ":i": false}
	if v := end.Visual; v != nil {
		args[":b"], args[":a"], args[":d"], args[":c"], args[":i"] = v.Before, v.After, v.Diff, v.Changed, v.Identical
	}
	return sqlitex.Execute(tx.conn, `UPDATE verify_runs SET ended = :now, outcome = :o, reason = :r, shot = :s,
		before_shot = :b, after_shot = :a, diff_shot = :d, changed = :c, identical = :i,
		started = coalesce(started, :now) WHERE id = :id`, &sqlitex.ExecOptions{Named: args})
}

// StartVerify marks a run started.
func (db *DB) StartVerify(ctx context.Context, id int64) error {
	return db.write(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `UPDATE verify_runs SET started = :now WHERE id = :id`,
			&sqlitex.ExecOptions{Named: map[string]any{":now": time.Now().UnixNano(), ":id": id}})
	})
}

// VerifyRuns returns a task's runs, newest first, at most limit.
func (db *DB) VerifyRuns(ctx context.Context, taskID string, limit int) ([]VerifyRun, error) {
	var out []VerifyRun
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+runColumns+` FROM verify_runs WHERE task_id = :t ORDER BY id DESC LIMIT +:n`,
			&sqlitex.ExecOptions{Named: map[string]any{":t": taskID, ":n": limit},
				ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanRun(st)); return nil }})
	})
	return out, err
}

// OpenVerifyRuns returns the runs that have not ended, oldest first: at
// start, the ones a daemon's exit cut off.
func (db *DB) OpenVerifyRuns(ctx context.Context) ([]VerifyRun, error) {
	var out []VerifyRun
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+runColumns+` FROM verify_runs WHERE ended IS NULL ORDER BY id`,
			&sqlitex.ExecOptions{ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanRun(st)); return nil }})
	})
	return out, err
}
