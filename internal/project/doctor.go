package project

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
)

// Finding is one thing snag doctor found wrong.
type Finding struct {
	Path    string `json:"path"`             // relative to .snag/
	Kind    string `json:"kind"`             // invalid | conflict | name | duplicate | dangling | cycle | temp
	Message string `json:"message"`          // what is wrong and the fix
	Fixable bool   `json:"fixable,omitzero"` // snag doctor --fix can fix it
}

// Doctor checks the project: files that do not parse or hold conflict
// markers, file names with control characters, ids and aliases used twice, depends_on entries that point nowhere
// or form a cycle, the notes' problems ([Project.NoteProblems]), and temp files left by a crash. It syncs the
// index first.
func (p *Project) Doctor(ctx context.Context) ([]Finding, error) {
	if _, err := p.Sync(ctx, true); err != nil {
		return nil, err
	}
	var out []Finding
	probs, err := p.DB.Problems(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range probs {
		switch {
		case r.State == snag.StateConflict:
			out = append(out, Finding{Path: r.Path, Kind: "conflict", Message: r.Error})
		case r.State != snag.StateOK:
			out = append(out, Finding{Path: r.Path, Kind: "invalid", Message: r.Error, Fixable: missingIdentity(r.Error)})
		}
	}
	tasks, _, err := p.DB.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out = append(out, badNames(p.Tasks, tasks)...)
	out = append(out, duplicates(tasks)...)
	lookup := queue.NewLookup(tasksOf(tasks))
	for _, l := range tasks {
		for _, d := range l.Task.DependsOn {
			if _, ok := lookup.Find(d); !ok {
				out = append(out, Finding{Path: l.File, Kind: "dangling",
					Message: fmt.Sprintf("%s depends on %s, which no task file has: fix or remove that depends_on entry", l.Task.Key, d)})
			}
		}
	}
	out = append(out, cycles(tasks, lookup)...)
	if _, err := p.DB.SyncNotes(ctx, p.NoteTrees()); err != nil {
		return nil, err
	}
	notes, err := p.NoteProblems(ctx)
	if err != nil {
		return nil, err
	}
	out = append(out, notes...)
	side := p.SideFolders()
	defer closeAll(side)
	for _, d := range append([]*taskfs.Dir{p.Tasks, p.Snag}, side...) {
		entries, _ := staleTemps(d)
		in, _ := filepath.Rel(filepath.Join(p.Root, Folder), d.Path())
		for _, name := range entries {
			out = append(out, Finding{Path: filepath.ToSlash(filepath.Join(in, name)), Kind: "temp", Fixable: true,
				Message: "a temp file left by an interrupted write: snag doctor --fix removes it"})
		}
	}
	return out, nil
}

// badNames finds task files whose names hold a control character (a
// newline, a tab, an escape): snag reads them, but every listing of the
// folder (ls, git status, a terminal) shows them wrong, and a name can pose
// as more than one line of output.
func badNames(dir *taskfs.Dir, tasks []queue.Located) []Finding {
	names, err := dir.Names()
	if err != nil {
		return nil
	}
	byFile := map[string]*queue.Task{}
	for _, l := range tasks {
		byFile[l.File] = l.Task
	}
	var out []Finding
	for _, n := range names {
		if !strings.ContainsFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }) {
			continue
		}
		path := index.TasksFolder + "/" + n
		msg := "the file name has a control character (shown escaped): rename the file"
		if t := byFile[path]; t != nil && t.Key != "" {
			msg += fmt.Sprintf(", for example: cd .snag/tasks && mv %s\\ -* '%s'", t.Key, queue.FileName(t.Key, t.Title))
		}
		out = append(out, Finding{Path: path, Kind: "name", Message: msg})
	}
	return out
}

func missingIdentity(msg string) bool {
	return strings.Contains(msg, "id: missing") || strings.Contains(msg, "key: missing")
}

func tasksOf(ls []queue.Located) []*queue.Task {
	out := make([]*queue.Task, len(ls))
	for i, l := range ls {
		out[i] = l.Task
	}
	return out
}

func duplicates(tasks []queue.Located) []Finding {
	var out []Finding
	for _, field := range []string{"id", "key"} {
		by := map[string][]string{}
		for _, l := range tasks {
			k := l.Task.ID
			if field == "key" {
				k = l.Task.Key
			}
			by[k] = append(by[k], l.File)
		}
		keys := make([]string, 0, len(by))
		for k := range by {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if files := by[k]; len(files) > 1 {
				slices.Sort(files)
				msg := fmt.Sprintf("id %s is in %d files: %s; a file was copied: keep the task in one, and give each copy that is a task of its own a fresh id and key (delete its id: and key: lines, then run snag doctor --fix)", k, len(files), strings.Join(files, ", "))
				if field == "key" {
					msg = fmt.Sprintf("key %s is in %d files: %s; the task made first keeps it and each other gets a new key, its id unchanged: snagd does it when it sees the files, snag doctor --fix now", k, len(files), strings.Join(files, ", "))
				}
				out = append(out, Finding{Path: files[0], Kind: "duplicate", Message: msg})
			}
		}
	}
	return out
}

// cycles finds depends_on loops, each reported once.
func cycles(tasks []queue.Located, lookup queue.Lookup) []Finding {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	file := map[string]string{}
	for _, l := range tasks {
		file[l.Task.ID] = l.File
	}
	var out []Finding
	var stack []*queue.Task
	var visit func(t *queue.Task)
	visit = func(t *queue.Task) {
		color[t.ID] = grey
		stack = append(stack, t)
		for _, d := range t.DependsOn {
			dt, ok := lookup.Find(d)
			if !ok {
				continue
			}
			switch color[dt.ID] {
			case white:
				visit(dt)
			case grey:
				i := slices.IndexFunc(stack, func(s *queue.Task) bool { return s.ID == dt.ID })
				var keys []string
				for _, s := range stack[i:] {
					keys = append(keys, s.Key)
				}
				keys = append(keys, dt.Key)
				out = append(out, Finding{Path: file[dt.ID], Kind: "cycle",
					Message: "depends_on loops: " + strings.Join(keys, " -> ") + ": none of them can ever be claimed; remove one of those entries"})
			}
		}
		stack = stack[:len(stack)-1]
		color[t.ID] = black
	}
	sorted := slices.Clone(tasks)
	slices.SortFunc(sorted, func(a, b queue.Located) int { return strings.Compare(a.File, b.File) })
	for _, l := range sorted {
		if color[l.Task.ID] == white {
			visit(l.Task)
		}
	}
	return out
}

const tempAge = time.Minute

// nextKey reserves the next task key number for a fix made without snagd:
// above the index's and the files', from the live state's sequence that
// snagd takes its keys from too (Keys); without one, the files' floor.
func (p *Project) nextKey(ctx context.Context) (int, error) {
	n, err := p.DB.NextFreeKey(ctx, p.Tasks)
	if err != nil || p.Keys == nil {
		return n, err
	}
	if n, err = p.Keys(ctx, n); err != nil {
		return 0, fmt.Errorf("take a key from %w, then run snag doctor --fix again", err)
	}
	return n, nil
}

func staleTemps(d *taskfs.Dir) ([]string, error) { return d.Temps(tempAge) }

func closeAll(ds []*taskfs.Dir) {
	for _, d := range ds {
		d.Close()
	}
}

// Fix repairs what doctor can repair by itself: it gives task files that
// lack an id or key fresh ones, and removes old temp files, keeping in
// .snag/recovered/ any that holds a person's save. It returns what it did,
// one line each.
func (p *Project) Fix(ctx context.Context) ([]string, error) {
	probs, err := p.DB.Problems(ctx)
	if err != nil {
		return nil, err
	}
	done, err := p.fixIdentities(ctx, probs, nil)
	if err != nil {
		return done, err
	}
	if done, err = p.fixSharedKeys(ctx, probs, done); err != nil {
		return done, err
	}
	if done, err = p.sweepTemps(done); err != nil {
		return done, err
	}
	if len(done) > 0 {
		if _, err := p.Sync(ctx, true); err != nil {
			return done, err
		}
	}
	return done, nil
}

// fixIdentities gives each task file that lacks an id or a key a fresh
// one, appending a line to done for each.
func (p *Project) fixIdentities(ctx context.Context, probs []*index.Row, done []string) ([]string, error) {
	for _, r := range probs {
		if r.State != snag.StateInvalid || !missingIdentity(r.Error) {
			continue
		}
		var key string
		_, _, err := p.Tasks.Update(trimTasks(r.Path), func(cur []byte) (out []byte, err error) {
			out, key, err = p.giveIdentity(ctx, cur)
			return out, err
		})
		if err != nil {
			return done, fmt.Errorf("fix %s: %w", r.Path, err)
		}
		msg := "gave " + r.Path + " a fresh id"
		if key != "" {
			msg += " and the key " + key
		}
		done = append(done, msg)
	}
	return done, nil
}

// giveIdentity is a task file's bytes with a fresh id where it has none
// and the next key where it has none, and that key; the bytes as they
// are when neither is what the file lacks (it changed meanwhile).
func (p *Project) giveIdentity(ctx context.Context, cur []byte) (out []byte, key string, err error) {
	_, perr := codec.Parse(cur)
	var pe *codec.ParseError
	if !errors.As(perr, &pe) || (pe.Field != "id" && pe.Field != "key") {
		return cur, "", nil
	}
	var fields []codec.Field
	if !strings.Contains(string(cur), "\nid:") {
		fields = append(fields, codec.Set("id", queue.NewID(time.Now())))
	}
	if !strings.Contains(string(cur), "\nkey:") {
		n, err := p.nextKey(ctx)
		if err != nil {
			return nil, "", err
		}
		key = queue.Alias(n)
		fields = append(fields, codec.Set("key", key))
	}
	out, err = codec.Edit(cur, fields...)
	return out, key, err
}

// fixSharedKeys gives each task whose key an older task holds too the
// next key (the task made first keeps it: SharedKeys), appending a line
// to done for each.
func (p *Project) fixSharedKeys(ctx context.Context, probs []*index.Row, done []string) ([]string, error) {
	for _, r := range SharedKeys(ctx, probs, func(ref queue.Ref) (*index.Item, error) { return p.DB.Get(ctx, ref) }) {
		n, err := p.nextKey(ctx)
		if err != nil {
			return done, fmt.Errorf("fix %s: %w", r.Path, err)
		}
		newKey := queue.Alias(n)
		newName, err := Renumber(p.Tasks, r, newKey)
		if err != nil && newName == "" {
			return done, err
		}
		if newName != "" {
			done = append(done, fmt.Sprintf("gave %s the key %s (%s keeps %s, made first); its id is unchanged; its file is %s",
				r.Path, newKey, r.Keeper, r.Key, Rel(path.Join(index.TasksFolder, newName))))
		}
	}
	return done, nil
}

// sweepTemps removes old temp files from the tasks folder, .snag and the
// side folders, keeping aside any that holds a person's save, appending a
// line to done for each save kept and each folder swept.
func (p *Project) sweepTemps(done []string) ([]string, error) {
	keep := func(l taskfs.Leftover) error {
		saved, err := p.KeepAside(l.Name, l.Data)
		if err == nil {
			done = append(done, fmt.Sprintf("kept a save of %s that a crash left in a hidden temp file: it is in %s; compare it with the task file and merge by hand",
				Rel(path.Join(index.TasksFolder, l.Name)), Rel(saved)))
		}
		return err
	}
	side := p.SideFolders()
	defer closeAll(side)
	for _, d := range append([]*taskfs.Dir{p.Tasks, p.Snag}, side...) {
		n, err := d.SweepTemps(tempAge, keep)
		if err != nil {
			return done, err
		}
		if n > 0 {
			done = append(done, fmt.Sprintf("removed %d temp files from %s", n, d.Path()))
		}
	}
	return done, nil
}
