package coord

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// The kinds of Message.
const (
	Report  = "report"
	Handoff = "handoff"
	Note    = "note"
	Inbox   = "inbox"
)

// maxBody bounds the body a message carries: enough to read the
// reasoning; the file, once merged, has the rest.
const maxBody = 4000

// Message is what a clone published for the others: an agent's report or
// handoff, or a note or inbox item added there, before git carries it.
type Message struct {
	ID      int64     `json:"id"`
	Clone   int64     `json:"clone"`
	Host    string    `json:"host"`
	Kind    string    `json:"kind"`
	From    string    `json:"from,omitempty"`
	To      string    `json:"to,omitempty"`
	Key     string    `json:"key,omitempty"` // the task's or the note's alias
	Type    string    `json:"type,omitempty"`
	Title   string    `json:"title,omitempty"`
	Body    string    `json:"body,omitempty"`
	Branch  string    `json:"branch,omitempty"`
	Created time.Time `json:"created"`
	Seen    bool      `json:"seen,omitempty"`
}

// Post adds m, from this clone, for every clone to read, and tells them.
// A body over 4,000 bytes is cut.
func (s *Store) Post(ctx context.Context, m Message) error {
	m.Body = cutBody(m.Body)
	if m.Branch == "" {
		m.Branch = s.Branch()
	}
	return s.tx(ctx, "publish a "+m.Kind, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO messages (workspace, clone, kind, from_name, to_name, key, type, title, body, branch)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id, created`,
			s.ws, s.Clone(), m.Kind, m.From, m.To, m.Key, m.Type, m.Title, m.Body, m.Branch).Scan(&m.ID, &m.Created)
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, m.Kind, map[string]any{"id": m.ID, "from": m.From, "to": m.To, "key": m.Key,
			"type": m.Type, "title": m.Title, "branch": m.Branch})
	})
}

// cutBody is body cut to maxBody bytes, on a character's boundary, saying
// so.
func cutBody(body string) string {
	if len(body) <= maxBody {
		return body
	}
	cut := maxBody
	for cut > 0 && body[cut]&0xC0 == 0x80 {
		cut--
	}
	return body[:cut] + " [cut: the file has the rest]"
}

// Messages lists the other clones' messages of kind, newest first, at most
// limit: to name alone when to is set, and not yet seen when unseen is.
func (s *Store) Messages(ctx context.Context, kind, to string, unseen bool, limit int) ([]Message, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT m.id, m.clone, coalesce(c.host, ''), m.kind, m.from_name, m.to_name, m.key, m.type,
			m.title, m.body, m.branch, m.created, m.seen IS NOT NULL
		FROM messages m LEFT JOIN clones c ON c.id = m.clone
		WHERE m.workspace = $1 AND m.kind = $2 AND m.clone <> $3 AND ($4 = '' OR m.to_name = $4) AND (NOT $5 OR m.seen IS NULL)
		ORDER BY m.id DESC LIMIT $6`, s.ws, kind, s.Clone(), to, unseen, limit)
	if err != nil {
		return nil, s.wrap("read the team's "+kind+"s", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Message, error) {
		var m Message
		err := r.Scan(&m.ID, &m.Clone, &m.Host, &m.Kind, &m.From, &m.To, &m.Key, &m.Type, &m.Title, &m.Body, &m.Branch, &m.Created, &m.Seen)
		return m, err
	})
	if err != nil {
		return nil, s.wrap("read the team's "+kind+"s", err)
	}
	s.ok()
	return out, nil
}

// MarkSeen marks messages ids seen (a handoff read by its agent).
func (s *Store) MarkSeen(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return s.tx(ctx, "mark seen", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE messages SET seen = now() WHERE workspace = $1 AND id = ANY($2) AND seen IS NULL`, s.ws, ids)
		return err
	})
}

// TeamAgent is a live agent of another clone, with what it holds.
type TeamAgent struct {
	Clone  int64
	Host   string
	Branch string
	ID     int64
	Name   string
	Client string
	Leases []Lease
	Files  []FileClaim
}

// Agents lists the live agents of the workspace's other clones, each with
// its held leases and live file claims.
func (s *Store) Agents(ctx context.Context) ([]TeamAgent, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT x.clone, c.host, c.branch, x.id, x.name, x.client
		FROM sessions x JOIN clones c ON c.id = x.clone
		WHERE x.workspace = $1 AND x.clone <> $2 AND x.ended IS NULL AND c.ended IS NULL ORDER BY x.name`, s.ws, s.Clone())
	if err != nil {
		return nil, s.wrap("list the team's agents", err)
	}
	agents, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TeamAgent, error) {
		var a TeamAgent
		err := r.Scan(&a.Clone, &a.Host, &a.Branch, &a.ID, &a.Name, &a.Client)
		return a, err
	})
	if err != nil {
		return nil, s.wrap("list the team's agents", err)
	}
	if len(agents) == 0 {
		s.ok()
		return nil, nil
	}
	type who struct{ clone, id int64 }
	at := map[who]int{}
	for i, a := range agents {
		at[who{a.Clone, a.ID}] = i
	}
	leases, err := s.leases(ctx, `l.state = 'held' AND l.clone <> `+itoa(s.Clone()))
	if err != nil {
		return nil, err
	}
	for _, l := range leases {
		if i, ok := at[who{l.Clone, l.Session}]; ok {
			agents[i].Leases = append(agents[i].Leases, l)
		}
	}
	claims, err := s.fileClaims(ctx, s.pool, "f.clone <> $2", s.Clone())
	if err != nil {
		return nil, s.wrap("list the team's file claims", err)
	}
	for _, c := range claims {
		if i, ok := at[who{c.Clone, c.Session}]; ok {
			agents[i].Files = append(agents[i].Files, c)
		}
	}
	s.ok()
	return agents, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// BranchActivity is what the workspace's other clones did lately on one
// branch: notes published, tasks claimed and resolved, the last report.
type BranchActivity struct {
	Branch   string
	Last     time.Time
	Nodes    []string
	Claimed  []string
	Resolved []string
	// Report is the latest report: by whom, on which machine, what, when.
	Report *Message
}

// activityKeep is how many keys of each kind a branch's activity lists.
const activityKeep = 5

// Activity reads, by branch, what the other clones did since since: the
// notes they published, the tasks claimed and resolved (from the shared
// audit log), and the latest report.
func (s *Store) Activity(ctx context.Context, since time.Time) (map[string]*BranchActivity, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	act := newActivity()
	rows, err := s.pool.Query(ctx, `SELECT a.branch, a.action, a.at, a.agent, a.detail, coalesce(nullif(l.key, ''), a.task_id), coalesce(c.host, '')
		FROM audit a LEFT JOIN leases l ON l.workspace = a.workspace AND l.task_id = a.task_id LEFT JOIN clones c ON c.id = a.clone
		WHERE a.workspace = $1 AND a.clone <> $2 AND a.branch <> '' AND a.at > $3
		AND a.action IN ('claim', 'resolve', 'report') AND a.outcome <> 'refused'
		AND (a.action <> 'resolve' OR l.state = 'done')
		ORDER BY a.at DESC LIMIT 5000`, s.ws, s.Clone(), since)
	if err != nil {
		return nil, s.wrap("read the team's activity", err)
	}
	for rows.Next() {
		var branch, action, agent, detail, key, host string
		var at time.Time
		if err := rows.Scan(&branch, &action, &at, &agent, &detail, &key, &host); err != nil {
			rows.Close()
			return nil, s.wrap("read the team's activity", err)
		}
		act.event(branch, action, at, agent, detail, key, host)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.wrap("read the team's activity", err)
	}
	notes, err := s.pool.Query(ctx, `SELECT branch, key, created FROM messages
		WHERE workspace = $1 AND clone <> $2 AND kind = 'note' AND branch <> '' AND created > $3 ORDER BY created DESC LIMIT 1000`,
		s.ws, s.Clone(), since)
	if err != nil {
		return nil, s.wrap("read the team's activity", err)
	}
	for notes.Next() {
		var branch, key string
		var at time.Time
		if err := notes.Scan(&branch, &key, &at); err != nil {
			notes.Close()
			return nil, s.wrap("read the team's activity", err)
		}
		act.note(branch, key, at)
	}
	notes.Close()
	if err := notes.Err(); err != nil {
		return nil, s.wrap("read the team's activity", err)
	}
	s.ok()
	return act.by, nil
}

// activity gathers the other members' activity by branch, newest first.
type activity struct{ by map[string]*BranchActivity }

func newActivity() *activity { return &activity{by: map[string]*BranchActivity{}} }

// branch is the activity of branch b, its last moment at or after at.
func (a *activity) branch(b string, at time.Time) *BranchActivity {
	x := a.by[b]
	if x == nil {
		x = &BranchActivity{Branch: b}
		a.by[b] = x
	}
	if at.After(x.Last) {
		x.Last = at
	}
	return x
}

// keep adds key to list, up to activityKeep keys, once.
func keep(list []string, key string) []string {
	if len(list) < activityKeep && !slices.Contains(list, key) {
		return append(list, key)
	}
	return list
}

// event counts an audit entry: a claim, a resolve or a report.
func (a *activity) event(branch, action string, at time.Time, agent, detail, key, host string) {
	x := a.branch(branch, at)
	switch action {
	case "claim":
		x.Claimed = keep(x.Claimed, key)
	case "resolve":
		x.Resolved = keep(x.Resolved, key)
	case "report":
		if x.Report == nil {
			x.Report = &Message{Kind: Report, From: agent, Host: host, Body: detail, Created: at, Branch: branch}
		}
	}
}

// note counts a note published on branch.
func (a *activity) note(branch, key string, at time.Time) {
	x := a.branch(branch, at)
	x.Nodes = keep(x.Nodes, key)
}
