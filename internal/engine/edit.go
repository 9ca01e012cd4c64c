package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// TaskEdit is a person's change of a task's fields (snag edit, snag dep,
// the board's edit form). A nil field keeps what the file says.
type TaskEdit struct {
	Title    *string
	Severity *queue.Severity
	Kind     *queue.Kind
	Wave     *int
	// Plan is the plan's slug; "" takes the task out of its plan.
	Plan *string
	// Files is the whole list of suspect files; empty removes it.
	Files *[]queue.FileRef
	// AddDeps are tasks it comes to depend on, by id or key; RemoveDeps
	// are entries of its depends_on to drop, by id or key.
	AddDeps, RemoveDeps []string
}

// Edited is what an edit did.
type Edited struct {
	// Task is the task as its file now holds it.
	Task *queue.Task
	// Changed says what changed, one "field old -> new" each, in the
	// order of the file; none when the file said so already.
	Changed []string
	// Warnings say what the new values point at that is not there yet.
	Warnings []string
}

// Edit changes a task's fields for person by: the values are checked, the
// file's current bytes are rewritten only where a value changes (comments,
// order and unknown keys stay), and the file, its index row and the audit
// entry are written in one transaction. A dependency must name a task
// that is there and close no cycle; the task's status and holder are not
// the edit's to change (snag done, cancel and release are).
func (e *Engine) Edit(ctx context.Context, ref queue.Ref, ed TaskEdit, by string) (Edited, error) {
	if err := ed.check(); err != nil {
		return Edited{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return Edited{}, err
	}
	out, err := e.edit(ctx, it, ed, by)
	if err != nil {
		if !index.Busy(err) {
			e.Audit(ctx, snag.AuditEntry{Actor: queue.Person, Agent: by, Action: "edit", TaskID: it.ID, Outcome: "refused", Detail: err.Error()})
		}
		return Edited{}, err
	}
	out.Warnings = e.AddWarnings(ctx, out.Task)
	if len(out.Changed) > 0 {
		e.writePlan(ctx)
		e.hub.Publish(snag.TaskEvent{Key: out.Task.Key, Status: out.Task.Status, Edited: true})
	}
	return out, nil
}

// edit is Edit of the indexed task it. e.mu must be held.
func (e *Engine) edit(ctx context.Context, it *index.Item, ed TaskEdit, by string) (Edited, error) {
	if err := clean(it); err != nil {
		return Edited{}, fmt.Errorf("edit %s: %w", it.Key, err)
	}
	add, err := e.depTargets(ctx, it, ed.AddDeps)
	if err != nil {
		return Edited{}, err
	}
	var out Edited
	var dkeys []string // the keys of the id entries of depends_on, for its comment
	m, err := e.prepareBytes(it, "edit", it.Key, func(cur []byte, t *queue.Task) ([]byte, *queue.Task, error) {
		fields, changed, keys, err := e.editFields(ctx, t, ed, add)
		if err != nil || len(fields) == 0 {
			return cur, t, err
		}
		out.Changed, dkeys = changed, keys
		fields = append(fields, codec.Set("updated", time.Now().UTC().Truncate(time.Second)))
		b, err := codec.Edit(cur, fields...)
		if err != nil {
			return nil, nil, err
		}
		b = withDepKeys(b, dkeys)
		t2, err := codec.Parse(b)
		if err != nil {
			return nil, nil, badValue("edit", err)
		}
		return b, t2, nil
	})
	if err != nil {
		return Edited{}, err
	}
	defer m.prep.Abandon()
	if len(out.Changed) == 0 {
		out.Task = m.moved
		return out, nil
	}
	err = e.p.DB.Update(ctx, func(tx *index.Tx) error {
		t, err := m.put(tx, e.p.Tasks)
		if err != nil {
			return err
		}
		out.Task = t
		return tx.Audit(snag.AuditEntry{Actor: queue.Person, Agent: by, Action: "edit", TaskID: t.ID, Outcome: "ok",
			Detail: strings.Join(out.Changed, "; ")})
	})
	if err == nil && m.placed {
		err = e.p.Tasks.Sync(m.prep)
	}
	return out, err
}

// check refuses values no task file may hold, before anything is read.
func (ed TaskEdit) check() error {
	if ed.Title != nil {
		if err := checkTitle("edit", strings.TrimSpace(*ed.Title)); err != nil {
			return err
		}
	}
	switch {
	case ed.Severity != nil && !slices.Contains(queue.Severities, *ed.Severity):
		return refuse(ErrInvalid, "bad_severity", "edit: unknown severity %q: want one of %s", *ed.Severity, join(queue.Severities))
	case ed.Kind != nil && !slices.Contains(queue.Kinds, *ed.Kind):
		return refuse(ErrInvalid, "bad_kind", "edit: unknown kind %q: want one of %s", *ed.Kind, join(queue.Kinds))
	case ed.Wave != nil && *ed.Wave < 0:
		return refuse(ErrInvalid, "bad_wave", "edit: wave %d: want a whole number from 0 (lower waves are handed out first)", *ed.Wave)
	case ed.Plan != nil && *ed.Plan != "" && !queue.ValidSlug(*ed.Plan):
		return refuse(ErrInvalid, "bad_plan", "edit: %q is not a plan's slug: snag plans lists them (lowercase words joined by -)", *ed.Plan)
	}
	for _, d := range slices.Concat(ed.AddDeps, ed.RemoveDeps) {
		if _, err := queue.ParseRef(d); err != nil {
			return refuse(ErrInvalid, "bad_ref", "edit: depends on: %v", err)
		}
	}
	return nil
}

// checkTitle refuses a title a task may not have; op names the command.
func checkTitle(op, title string) error {
	switch {
	case title == "":
		return refuse(ErrInvalid, "bad_title", "%s: empty title: say in a few words what is wrong or wanted", op)
	case len(title) > 300:
		return refuse(ErrInvalid, "bad_title", "%s: title is over 300 bytes: keep it short and put the detail in the body", op)
	case strings.ContainsFunc(title, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return refuse(ErrInvalid, "bad_title", "%s: title has a control character: keep it on one line", op)
	}
	return nil
}

func join[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// depTargets looks up the tasks it's task comes to depend on: each must be
// there, not it, and close no cycle.
func (e *Engine) depTargets(ctx context.Context, it *index.Item, refs []string) ([]*index.Item, error) {
	var out []*index.Item
	var ids []string
	for _, d := range refs {
		r, _ := queue.ParseRef(d)
		dep, err := e.p.DB.Get(ctx, r)
		if errors.Is(err, ErrNotFound) {
			return nil, refuse(ErrInvalid, "bad_ref", "dep add: no task %s: snag list shows the tasks", d)
		} else if err != nil {
			return nil, err
		}
		if dep.ID == it.ID {
			return nil, refuse(ErrInvalid, "cycle", "dep add: %s cannot depend on itself", it.Key)
		}
		out = append(out, dep)
		ids = append(ids, dep.ID)
	}
	if cycle := e.depCycle(ctx, it.Key, it.ID, ids); cycle != nil {
		return nil, refuse(ErrInvalid, "cycle", "dep add: that would make a cycle: %s: remove one of those dependencies first (snag dep rm)",
			strings.Join(cycle, " -> "))
	}
	return out, nil
}

// editFields are the changes ed makes to t (the task the file holds now),
// what each changed, and the keys of depends_on's id entries.
func (e *Engine) editFields(ctx context.Context, t *queue.Task, ed TaskEdit, add []*index.Item) (fields []codec.Field, changed, keys []string, err error) {
	set := func(key, from, to string, v any) {
		if from != to {
			fields = append(fields, codec.Set(key, v))
			changed = append(changed, key+" "+shown(from)+" -> "+shown(to))
		}
	}
	if ed.Title != nil {
		set("title", t.Title, strings.TrimSpace(*ed.Title), strings.TrimSpace(*ed.Title))
	}
	if ed.Severity != nil {
		set("severity", string(t.Severity), string(*ed.Severity), string(*ed.Severity))
	}
	if ed.Kind != nil {
		set("kind", string(t.Kind), string(*ed.Kind), string(*ed.Kind))
	}
	if ed.Wave != nil {
		set("wave", strconv.Itoa(t.Wave), strconv.Itoa(*ed.Wave), *ed.Wave)
	}
	if ed.Plan != nil && *ed.Plan != t.Plan {
		if *ed.Plan == "" {
			fields = append(fields, codec.Unset("plan"))
			changed = append(changed, "plan "+t.Plan+" -> none")
		} else {
			set("plan", t.Plan, *ed.Plan, *ed.Plan)
		}
	}
	if ed.Files != nil {
		from, to := fileList(t.SuspectFiles), fileList(*ed.Files)
		if from != to {
			if len(*ed.Files) == 0 {
				fields = append(fields, codec.Unset("suspect_files"))
			} else {
				fields = append(fields, codec.Set("suspect_files", *ed.Files))
			}
			changed = append(changed, "suspect_files "+shown(from)+" -> "+shown(to))
		}
	}
	if len(ed.AddDeps) > 0 || len(ed.RemoveDeps) > 0 {
		deps, notes, err := e.editDeps(ctx, t, add, ed.RemoveDeps)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(notes) > 0 {
			if len(deps) == 0 {
				fields = append(fields, codec.Unset("depends_on"))
			} else {
				fields = append(fields, codec.Set("depends_on", deps))
			}
			changed = append(changed, notes...)
			_, keys = e.depIDs(ctx, deps)
		}
	}
	return fields, changed, keys, nil
}

// editDeps is t's depends_on with the tasks of add appended (by id, when
// no entry names them yet) and the entries that name remove taken out, and
// a "depends_on + SNAG-3" note for each change. Entries a person wrote stay
// as written. A remove that names no entry is refused with what there is.
func (e *Engine) editDeps(ctx context.Context, t *queue.Task, add []*index.Item, remove []string) ([]string, []string, error) {
	deps := slices.Clone(t.DependsOn)
	// target is the id an entry names, and the task's key, or the entry
	// when no task answers.
	names := func(entry string) (id, key string) {
		r, err := queue.ParseRef(entry)
		if err != nil {
			return entry, entry
		}
		if it, err := e.p.DB.Get(ctx, r); err == nil && it.ID != "" {
			return it.ID, cmp.Or(it.Key, it.ID)
		}
		return r.String(), r.String()
	}
	target := func(entry string) string { id, _ := names(entry); return id }
	var notes []string
	for _, rm := range remove {
		want, key := names(rm)
		n := len(deps)
		deps = slices.DeleteFunc(deps, func(d string) bool { return strings.EqualFold(d, rm) || target(d) == want })
		if len(deps) == n {
			has := "no depends_on"
			if len(t.DependsOn) > 0 {
				has = "depends_on: " + strings.Join(e.DepKeys(ctx, t.DependsOn), ", ")
			}
			return nil, nil, refuse(ErrInvalid, "not_a_dependency", "dep rm: %s does not depend on %s (it has %s)", t.Key, rm, has)
		}
		notes = append(notes, "depends_on - "+key)
	}
	for _, a := range add {
		if slices.ContainsFunc(deps, func(d string) bool { return target(d) == a.ID }) {
			continue // there already: nothing to change
		}
		deps = append(deps, a.ID)
		notes = append(notes, "depends_on + "+a.Key)
	}
	return deps, notes, nil
}

// fileList is suspect files as a person reads them: path:A-B, comma-joined.
func fileList(fs []queue.FileRef) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.String()
	}
	return strings.Join(s, ", ")
}

// shown is a value in an edit's note: "none" for nothing.
func shown(v string) string {
	if v == "" {
		return "none"
	}
	return v
}
