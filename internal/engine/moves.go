package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

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
	// Source names what made it, when not a person or an agent
	// (queue.SourceCapture); ID is its id when the caller named files by it
	// first, else a new one.
	Source string
	ID     string
}

// Add creates a task file and returns the task and its path, relative to
// .snag/. A person's task is vetted and open; anything an agent or a tool
// adds is unvetted and lands in the inbox.
func (e *Engine) Add(ctx context.Context, nt NewTask, actor queue.Actor, who string) (*queue.Task, string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	title := strings.TrimSpace(nt.Title)
	if err := checkTitle("add", title); err != nil {
		return nil, "", err
	}
	for _, d := range nt.DependsOn {
		if _, err := queue.ParseRef(d); err != nil {
			return nil, "", refuse(ErrInvalid, "bad_ref", "add: depends on: %v", err)
		}
	}
	if missing := e.danglingDeps(ctx, nt.DependsOn); len(missing) > 0 && actor != queue.Person {
		// The task would stay blocked until someone writes what it waits
		// for (a person may be about to: they are told, not refused).
		return nil, "", refuse(ErrInvalid, "bad_ref", "add: depends_on names %s, which no task has: name existing tasks (snag_list shows them), or leave depends_on out",
			strings.Join(missing, ", "))
	}
	if nt.Plan != "" && actor != queue.Person {
		// An agent names a plan that is there (a person may name the plan
		// they are about to write).
		if _, err := os.Stat(filepath.Join(e.plansDir(), nt.Plan+".md")); err != nil || !queue.ValidSlug(nt.Plan) {
			return nil, "", refuse(ErrInvalid, "bad_plan", "add: no plan %q: snag_plan {\"action\": \"list\"} lists the plans by slug", nt.Plan)
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	t := &queue.Task{
		ID: cmp.Or(nt.ID, queue.NewID(now)), Title: title, Source: nt.Source,
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
	name, err := e.createKeyed(ctx, t)
	if err != nil {
		return nil, "", err
	}
	if _, err := e.p.DB.SyncFile(ctx, e.p.Tasks, name); err != nil {
		return nil, "", err
	}
	e.Audit(ctx, snag.AuditEntry{Actor: actor, Agent: who, Action: "add", TaskID: t.ID, Outcome: "ok", Detail: t.Key + " " + t.Title})
	path := index.TasksFolder + "/" + name
	e.writePlan(ctx)
	e.hub.Publish(snag.TaskEvent{Path: path, Added: new(true), Key: t.Key})
	if t.Status == queue.StatusInbox {
		// A finding goes to the team at once, unvetted, before git carries it.
		e.teamPost(coord.Message{Kind: coord.Inbox, From: who, Key: t.Key, Type: string(t.Kind), Title: t.Title, Body: string(t.Body)})
	}
	return t, path, nil
}

// depIDs is deps as snag writes them: by id, so that a reference follows
// its task when a shared key is renumbered (keys.go), with the keys they
// had, for a comment beside them. A reference no task answers to, or two
// do, is written as it was given.
func (e *Engine) depIDs(ctx context.Context, deps []string) (ids, keys []string) {
	for _, d := range deps {
		ref, err := queue.ParseRef(d)
		if err != nil {
			ids = append(ids, d)
			continue
		}
		it, err := e.p.DB.Get(ctx, ref)
		if err != nil || it.ID == "" {
			ids = append(ids, d)
			continue
		}
		ids = append(ids, it.ID)
		if it.Key != "" {
			keys = append(keys, it.Key)
		}
	}
	return ids, keys
}

// giveBackKey returns key number n, minted for an add that was refused,
// to the index's reservation and the live state's sequence, where it was
// the last taken: a refused add leaves no gap in the keys.
func (e *Engine) giveBackKey(ctx context.Context, n int) {
	e.p.DB.GiveBackKey(ctx, n)
	e.team.s.GiveBack(ctx, "task", int64(n))
}

// danglingDeps lists the entries of deps that name no task here.
func (e *Engine) danglingDeps(ctx context.Context, deps []string) []string {
	var out []string
	for _, d := range deps {
		ref, err := queue.ParseRef(d)
		if err != nil {
			continue
		}
		if _, err := e.p.DB.Get(ctx, ref); err != nil {
			out = append(out, d)
		}
	}
	return out
}

// AddWarnings says what a person's new task t waits on that no task is
// yet: it stays blocked until one is written.
func (e *Engine) AddWarnings(ctx context.Context, t *queue.Task) []string {
	var out []string
	for _, d := range e.danglingDeps(ctx, t.DependsOn) {
		out = append(out, fmt.Sprintf("%s depends on %s, which no task has yet: it stays blocked until one does", t.Key, d))
	}
	if t.Plan != "" {
		if _, err := os.Stat(filepath.Join(e.plansDir(), t.Plan+".md")); err != nil {
			out = append(out, fmt.Sprintf("%s names the plan %q, which does not exist yet: snag plans new writes one", t.Key, t.Plan))
		}
	}
	return out
}

// withDepKeys puts a comment naming keys after the depends_on line of a
// new task file: `depends_on: [tsk_...] # SNAG-3`, the ids for snag, the
// keys for a person reading the file.
func withDepKeys(data []byte, keys []string) []byte {
	if len(keys) == 0 {
		return data
	}
	i := bytes.Index(data, []byte("\ndepends_on: "))
	if i < 0 {
		return data
	}
	end := i + 1 + bytes.IndexByte(data[i+1:], '\n')
	out := slices.Concat(data[:end], []byte(" # "+strings.Join(keys, ", ")), data[end:])
	return out
}

// badValue is the refusal of op (add, edit) whose values a task file
// cannot hold (a negative wave, a suspect file outside the repository),
// named by the field as the caller gave it, not by a line of a file it
// never saw.
func badValue(op string, err error) error {
	var pe *codec.ParseError
	if !errors.As(err, &pe) || pe.Field == "" {
		return fmt.Errorf("%s: %w", op, err)
	}
	code := "bad_json"
	switch pe.Field {
	case "wave":
		code = "bad_wave"
	case "suspect_files":
		code = "bad_file"
	case "depends_on":
		code = "bad_ref"
	}
	return refuse(ErrInvalid, code, "%s: %s: %s", op, pe.Field, pe.Msg)
}

// keyTries is how many fresh keys [Engine.Add] tries before it gives up:
// each try loses only to a person writing a file with that very key in the
// same instant.
const keyTries = 20

// createKeyed gives t the next key that no task file uses, on disk as well
// as in the index (a person's hand-written SNAG-6 - x.md may not be indexed
// yet), and creates its file. Should another file with that key appear while
// it does so, it removes its own file and takes the next key: it never
// leaves a file whose key another file has. It returns the file's name.
func (e *Engine) createKeyed(ctx context.Context, t *queue.Task) (string, error) {
	var keys []string
	t.DependsOn, keys = e.depIDs(ctx, t.DependsOn)
	for range keyTries {
		n, err := e.mintKey(ctx)
		if err != nil {
			if _, said := errors.AsType[*Error](err); said {
				return "", err
			}
			return "", fmt.Errorf("add: %w", err)
		}
		t.Key = queue.Alias(n)
		if cycle := e.depCycle(ctx, t.Key, "", t.DependsOn); cycle != nil {
			e.giveBackKey(ctx, n) // refused: no key is used up
			return "", refuse(ErrInvalid, "cycle", "add: depends_on would make a cycle: %s: depend on none of those, or change the task that depends on %s",
				strings.Join(cycle, " -> "), t.Key)
		}
		data := withDepKeys(codec.Format(t), keys)
		if _, err := codec.Parse(data); err != nil {
			e.giveBackKey(ctx, n)
			return "", badValue("add", err)
		}
		name := queue.FileName(t.Key, t.Title)
		if err := e.p.Tasks.Create(name, data); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return "", fmt.Errorf("add: %w", err)
		}
		used, err := e.p.DB.DiskKeys(ctx, e.p.Tasks)
		if err != nil {
			e.p.Tasks.Remove(name)
			return "", fmt.Errorf("add: %w", err)
		}
		others := slices.DeleteFunc(used[n], func(s string) bool { return s == name })
		if ref, err := queue.ParseRef(t.Key); err == nil {
			if it, err := e.p.DB.Get(ctx, ref); err == nil && it.Path != index.TasksFolder+"/"+name {
				others = append(others, project.Name(it)) // indexed meanwhile
			}
		}
		if len(others) == 0 {
			return name, nil
		}
		if err := e.p.Tasks.Remove(name); err != nil {
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

// Step is one move of a chain that moveSteps makes.
type Step struct {
	Action queue.Action
	Actor  queue.Actor
}

// moveFile makes one move of the status machine on an indexed task's file,
// inside tx, and indexes what it wrote (see moveSteps).
func (e *Engine) moveFile(tx *index.Tx, item *index.Item, action queue.Action, actor queue.Actor, who string) (*queue.Task, error) {
	return e.moveSteps(tx, item, who, Step{action, actor})
}

// moveSteps makes several moves of the status machine in one write of the
// file, inside tx (see prepareMove), and indexes the bytes it wrote without
// reading them back: each version of the file is parsed once. It returns
// the task as the file now holds it. Its temp file is written and synced
// inside tx; the writes that can wait for a batch go through commit.
func (e *Engine) moveSteps(tx *index.Tx, item *index.Item, who string, steps ...Step) (*queue.Task, error) {
	return e.moveStepsOf(tx, item, nil, who, steps...)
}

// moveStepsOf is moveSteps of a task under lease l (see prepareMoveOf).
func (e *Engine) moveStepsOf(tx *index.Tx, item *index.Item, l *index.Lease, who string, steps ...Step) (*queue.Task, error) {
	m, err := e.prepareMoveOf(item, l, who, steps...)
	if err != nil {
		return nil, err
	}
	defer m.prep.Abandon()
	t, err := m.put(tx, e.p.Tasks)
	if m.placed && err == nil {
		err = e.p.Tasks.Sync(m.prep)
	}
	return t, err
}

// lastOfEach keeps one change per key, the last given, where the key was
// first named: a chain of moves sets status (and updated) once.
func lastOfEach(fields []codec.Field) []codec.Field {
	last := map[string]codec.Field{}
	var order []string
	for _, f := range fields {
		if _, ok := last[f.Key]; !ok {
			order = append(order, f.Key)
		}
		last[f.Key] = f
	}
	out := make([]codec.Field, len(order))
	for i, k := range order {
		out[i] = last[k]
	}
	return out
}

// changes are the frontmatter edits a move makes. Claim and release are
// lease operations whose times live in the lease table: they leave updated
// alone, so a claim and a release give back the file's original bytes and
// agents picking work up and putting it down make no churn in git.
func changes(t *queue.Task, action queue.Action, to queue.Status, who string) []codec.Field {
	now := time.Now().UTC().Truncate(time.Second)
	f := []codec.Field{codec.Set("status", string(to))}
	switch action {
	case queue.ActClaim:
		return append(f, codec.Set("assignee", who))
	case queue.ActRelease:
		return append(f, codec.Unset("assignee"))
	case queue.ActPromote:
		f = append(f, codec.Set("trust", string(queue.TrustVetted)))
	case queue.ActPass:
		f = append(f, codec.Set("verified", true))
	case queue.ActReopen:
		f = append(f, codec.Unset("assignee"))
		if t.Verified {
			f = append(f, codec.Set("verified", false))
		}
	case queue.ActCancel, queue.ActReject:
		f = append(f, codec.Unset("assignee"))
	}
	return append(f, codec.Set("updated", now))
}

func clean(it *index.Item) error {
	switch {
	case it.State == snag.StateConflict:
		return fmt.Errorf("%w: %s has git conflict markers: %s", ErrNotClean, it.Path, it.Error)
	case it.State != snag.StateOK:
		return fmt.Errorf("%w: %s", ErrNotClean, it.Error)
	case it.Duplicate:
		return fmt.Errorf("%w: another file has the same id or key as %s: snag doctor names both", ErrNotClean, it.Path)
	case it.Task == nil:
		return fmt.Errorf("%w: %s has no task data", ErrNotClean, it.Path)
	}
	return nil
}

// maxDepWalk bounds the tasks a cycle check reads.
const maxDepWalk = 10000

// depCycle returns the cycle that the task keyed key (and, once it has
// one, id) depending on deps would close (key -> dep -> ... -> key), or
// nil: a task file may already name the key a new task is about to get.
func (e *Engine) depCycle(ctx context.Context, key, id string, deps []string) []string {
	seen := map[string]bool{}
	var walk func(ref string, path []string) []string
	walk = func(ref string, path []string) []string {
		r, err := queue.ParseRef(ref)
		if err != nil {
			return nil
		}
		if r.String() == key || (id != "" && r.String() == id) {
			return append(path, key)
		}
		if seen[r.String()] || len(seen) >= maxDepWalk {
			return nil
		}
		seen[r.String()] = true
		it, err := e.p.DB.Get(ctx, r)
		if err != nil || it.Task == nil {
			return nil
		}
		name := it.Key
		if name == "" {
			name = ref
		}
		for _, d := range it.Task.DependsOn {
			if c := walk(d, append(path, name)); c != nil {
				return c
			}
		}
		return nil
	}
	for _, d := range deps {
		if c := walk(d, []string{key}); c != nil {
			return c
		}
	}
	return nil
}
