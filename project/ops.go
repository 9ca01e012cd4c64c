package project

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/queue"
)

// Sync brings the index in step with the files (hashing only what changed
// since the last look, or everything with hash set) and regenerates
// plan.json when anything changed or it is missing.
func (p *Project) Sync(ctx context.Context, hash bool) (index.ScanStats, error) {
	st, err := p.DB.Scan(ctx, p.Tasks, index.ScanOptions{Hash: hash})
	if err != nil {
		return st, err
	}
	if _, _, err := p.Snag.Read(PlanFile); st.Changed() || err != nil {
		if err := p.WritePlan(ctx); err != nil {
			return st, err
		}
	}
	return st, nil
}

// Rebuild rebuilds the index from the files and regenerates plan.json.
func (p *Project) Rebuild(ctx context.Context) (index.ScanStats, error) {
	st, err := p.DB.Rebuild(ctx, p.Tasks)
	if err != nil {
		return st, err
	}
	return st, p.WritePlan(ctx)
}

// WritePlan regenerates plan.json from the index, writing it only when its
// bytes change.
func (p *Project) WritePlan(ctx context.Context) error {
	tasks, problems, err := p.DB.Snapshot(ctx)
	if err != nil {
		return err
	}
	data := queue.BuildPlan(tasks, problems)
	if cur, _, err := p.Snag.Read(PlanFile); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	if err := p.Snag.Write(PlanFile, data); err != nil {
		return fmt.Errorf("write plan.json: %w", err)
	}
	return nil
}

// NewTask is what a person or an agent gives to add a task.
type NewTask struct {
	Title     string
	Body      []byte
	Kind      queue.Kind
	Severity  queue.Severity
	Wave      int
	Plan      string
	Files     []queue.FileRef
	DependsOn []string
	Capture   *queue.Capture
}

// Add creates a task file. A person's task is vetted and open; anything an
// agent or a tool adds is unvetted and lands in the inbox.
func (p *Project) Add(ctx context.Context, nt NewTask, actor queue.Actor, who string) (*queue.Task, string, error) {
	title := strings.TrimSpace(nt.Title)
	switch {
	case title == "":
		return nil, "", errors.New("add: empty title: say in a few words what is wrong or wanted")
	case len(title) > 300:
		return nil, "", errors.New("add: title is over 300 bytes: keep it short and put the detail in the body")
	case strings.ContainsFunc(title, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return nil, "", errors.New("add: title has a control character: keep it on one line")
	}
	for _, d := range nt.DependsOn {
		if _, err := queue.ParseRef(d); err != nil {
			return nil, "", fmt.Errorf("add: depends on: %w", err)
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	t := &queue.Task{
		ID: queue.NewID(now), Title: title,
		Status: queue.StatusOpen, Trust: queue.TrustVetted,
		Severity: orDefault(nt.Severity, queue.DefaultSeverity), Kind: orDefault(nt.Kind, queue.DefaultKind),
		Wave: nt.Wave, Plan: nt.Plan, DependsOn: nt.DependsOn, SuspectFiles: nt.Files, Capture: nt.Capture,
		Created: now, Updated: now, Body: nt.Body,
	}
	if t.Wave == 0 {
		t.Wave = queue.DefaultWave
	}
	if actor != queue.Person {
		t.Status, t.Trust = queue.StatusInbox, queue.TrustUnvetted
	}
	if len(t.Body) > 0 && !bytes.HasSuffix(t.Body, []byte("\n")) {
		t.Body = append(t.Body, '\n')
	}
	name, err := p.createKeyed(ctx, t)
	if err != nil {
		return nil, "", err
	}
	if _, err := p.DB.SyncFile(ctx, p.Tasks, name); err != nil {
		return nil, "", err
	}
	p.audit(ctx, actor, who, "add", t.ID, "ok", t.Key+" "+t.Title)
	return t, index.TasksFolder + "/" + name, p.planAfterChange(ctx)
}

// keyTries is how many fresh keys [Project.Add] tries before it gives up:
// each try loses only to a person writing a file with that very key in the
// same instant.
const keyTries = 20

// createKeyed gives t the next key that no task file uses, on disk as well
// as in the index (a person's hand-written SNAG-6 - x.md may not be indexed
// yet), and creates its file. Should another file with that key appear while
// it does so, it removes its own file and takes the next key: it never
// leaves a file whose key another file has. It returns the file's name.
func (p *Project) createKeyed(ctx context.Context, t *queue.Task) (string, error) {
	for range keyTries {
		n, err := p.DB.NextFreeKey(ctx, p.Tasks)
		if err != nil {
			return "", fmt.Errorf("add: %w", err)
		}
		t.Key = queue.Alias(n)
		data := queue.Format(t)
		if _, err := queue.Parse(data); err != nil {
			return "", fmt.Errorf("add: %w", err)
		}
		name := queue.FileName(t.Key, t.Title)
		if err := p.Tasks.Create(name, data); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return "", fmt.Errorf("add: %w", err)
		}
		used, err := p.DB.DiskKeys(ctx, p.Tasks)
		if err != nil {
			p.Tasks.Remove(name)
			return "", fmt.Errorf("add: %w", err)
		}
		others := slices.DeleteFunc(used[n], func(s string) bool { return s == name })
		if ref, err := queue.ParseRef(t.Key); err == nil {
			if it, err := p.DB.Get(ctx, ref); err == nil && it.Path != index.TasksFolder+"/"+name {
				others = append(others, trimTasks(it.Path)) // indexed meanwhile
			}
		}
		if len(others) == 0 {
			return name, nil
		}
		if err := p.Tasks.Remove(name); err != nil {
			return "", fmt.Errorf("add: %s appeared beside %s with the same key; removing %s: %w", strings.Join(others, ", "), name, name, err)
		}
	}
	return "", fmt.Errorf("add: every key tried was taken by a file written meanwhile (%d tries): try again", keyTries)
}

func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// ErrNotClean is wrapped by errors for tasks snag will not change: the file
// does not parse, holds conflict markers, or shares its id with another.
var ErrNotClean = errors.New("task file is not clean")

// Move makes one move of the status machine on a task: it checks the move
// against the file's current bytes, rewrites only the lines that change,
// re-indexes the file and records the move in the audit log. It returns the
// task as it now is.
func (p *Project) Move(ctx context.Context, ref queue.Ref, action queue.Action, actor queue.Actor, who string) (*queue.Task, error) {
	item, err := p.DB.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	moved, err := p.MoveFile(item, action, actor, who)
	if err != nil {
		if item.Task != nil {
			p.audit(ctx, actor, who, string(action), item.Task.ID, "refused", err.Error())
		}
		return nil, err
	}
	if _, err := p.DB.SyncFile(ctx, p.Tasks, Name(item)); err != nil {
		return nil, err
	}
	p.audit(ctx, actor, who, string(action), moved.ID, "ok", string(item.Status)+" -> "+string(moved.Status))
	return moved, p.planAfterChange(ctx)
}

// planAfterChange regenerates plan.json after a change, unless the caller
// does (PlanLater).
func (p *Project) planAfterChange(ctx context.Context) error {
	if p.PlanLater {
		return nil
	}
	return p.WritePlan(ctx)
}

// Name is an indexed task's file name in tasks/.
func Name(it *index.Item) string { return trimTasks(it.Path) }

// MoveFile makes one move on the task file alone: it checks the move
// against the file's current bytes (a person may have saved since it was
// indexed), rewrites only the lines that change, and returns the task as
// the file now holds it. The caller brings the index along.
func (p *Project) MoveFile(item *index.Item, action queue.Action, actor queue.Actor, who string) (*queue.Task, error) {
	return p.MoveFileSteps(item, who, Step{action, actor})
}

// Step is one move of a chain that [Project.MoveFileSteps] makes.
type Step struct {
	Action queue.Action
	Actor  queue.Actor
}

// MoveFileSteps makes several moves of the status machine, each allowed
// from where the one before left the task, in one write of the file: a
// resolve that the project's config turns straight into resolved is one
// rename and one fsync, not two.
func (p *Project) MoveFileSteps(item *index.Item, who string, steps ...Step) (*queue.Task, error) {
	if len(steps) == 0 {
		return nil, errors.New("move: no steps")
	}
	action := steps[0].Action
	ref := item.Key
	if ref == "" {
		ref = Rel(item.Path)
	}
	if err := clean(item); err != nil {
		return nil, fmt.Errorf("%s %s: %w", action, ref, err)
	}
	var moved *queue.Task
	_, _, err := p.Tasks.Update(Name(item), func(cur []byte) ([]byte, error) {
		t, err := queue.Parse(cur)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotClean, queue.WithPath(err, item.Path))
		}
		if t.ID != item.Task.ID {
			return nil, fmt.Errorf("%s %s: %s now holds %s: run snag reindex and try again", action, ref, item.Path, t.ID)
		}
		var fields []queue.Field
		at := t.Status
		for _, st := range steps {
			to, err := queue.Transition(at, st.Action, st.Actor)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", st.Action, t.Key, err)
			}
			fields = append(fields, changes(t, st.Action, to, who)...)
			at = to
		}
		out, err := queue.Edit(cur, lastOfEach(fields)...)
		if err != nil {
			return nil, err
		}
		moved, err = queue.Parse(out)
		return out, err
	})
	if err != nil {
		return nil, err
	}
	return moved, nil
}

// lastOfEach keeps one change per key, the last given, where the key was
// first named: a chain of moves sets status (and updated) once.
func lastOfEach(fields []queue.Field) []queue.Field {
	last := map[string]queue.Field{}
	var order []string
	for _, f := range fields {
		if _, ok := last[f.Key]; !ok {
			order = append(order, f.Key)
		}
		last[f.Key] = f
	}
	out := make([]queue.Field, len(order))
	for i, k := range order {
		out[i] = last[k]
	}
	return out
}

// changes are the frontmatter edits a move makes. Claim and release are
// lease operations whose times live in the lease table: they leave updated
// alone, so a claim and a release give back the file's original bytes and
// agents picking work up and putting it down make no churn in git.
func changes(t *queue.Task, action queue.Action, to queue.Status, who string) []queue.Field {
	now := time.Now().UTC().Truncate(time.Second)
	f := []queue.Field{queue.Set("status", string(to))}
	switch action {
	case queue.ActClaim:
		return append(f, queue.Set("assignee", who))
	case queue.ActRelease:
		return append(f, queue.Unset("assignee"))
	case queue.ActPromote:
		f = append(f, queue.Set("trust", string(queue.TrustVetted)))
	case queue.ActPass:
		f = append(f, queue.Set("verified", true))
	case queue.ActReopen:
		f = append(f, queue.Unset("assignee"))
		if t.Verified {
			f = append(f, queue.Set("verified", false))
		}
	case queue.ActCancel, queue.ActReject:
		f = append(f, queue.Unset("assignee"))
	}
	return append(f, queue.Set("updated", now))
}

func clean(it *index.Item) error {
	switch {
	case it.State == index.StateConflict:
		return fmt.Errorf("%w: %s has git conflict markers: %s", ErrNotClean, it.Path, it.Error)
	case it.State != index.StateOK:
		return fmt.Errorf("%w: %s", ErrNotClean, it.Error)
	case it.Dup:
		return fmt.Errorf("%w: another file has the same id or key as %s: snag doctor names both", ErrNotClean, it.Path)
	case it.Task == nil:
		return fmt.Errorf("%w: %s has no task data", ErrNotClean, it.Path)
	}
	return nil
}

// audit records an action; the log is best effort next to the change it
// describes, which has already happened.
func (p *Project) audit(ctx context.Context, actor queue.Actor, who, action, taskID, outcome, detail string) {
	_ = p.DB.Audit(ctx, index.AuditEntry{Actor: actor, Agent: who, Action: action, TaskID: taskID, Outcome: outcome, Detail: detail})
}

// Search runs a full-text query (see [index.DB.Search]); a query that is a
// task's alias or id lists that task first.
func (p *Project) Search(ctx context.Context, query string, limit int) ([]index.Hit, error) {
	hits, err := p.DB.Search(ctx, query, limit)
	if err != nil {
		return nil, err
	}
	if ref, rerr := queue.ParseRef(query); rerr == nil && (ref.ID != "" || strings.Contains(query, "-")) {
		if it, gerr := p.DB.Get(ctx, ref); gerr == nil {
			hits = slices.DeleteFunc(hits, func(h index.Hit) bool { return h.Path == it.Path })
			hits = append([]index.Hit{{Row: it.Row}}, hits...)
		}
	}
	if hits == nil {
		hits = []index.Hit{}
	}
	return hits, nil
}
