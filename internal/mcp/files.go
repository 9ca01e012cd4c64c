package mcp

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// Files is the backend without a daemon: it reads .snag/tasks with the
// queue package on every call. Its reads are labelled source "files" (the
// statuses may be stale: leases live in snagd); its writes fail with
// [ErrNoDaemon].
type Files struct {
	Root string // the project root, the folder holding .snag/
}

// Source is "files".
func (f *Files) Source() string { return SourceFiles }

type fileTask struct {
	t    *queue.Task
	file string // relative to .snag/
}

func (f *Files) read() ([]fileTask, error) {
	dir, err := taskfs.OpenDir(filepath.Join(f.Root, ".snag", "tasks"))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	ents, err := dir.List()
	if err != nil {
		return nil, err
	}
	var out []fileTask
	for _, e := range ents {
		if e.Problem != nil {
			continue
		}
		raw, _, err := dir.Read(e.Name)
		if err != nil {
			continue
		}
		t, err := codec.Parse(raw)
		if err != nil {
			continue
		}
		out = append(out, fileTask{t, "tasks/" + e.Name})
	}
	slices.SortFunc(out, func(a, b fileTask) int { return cmp.Or(queue.Compare(a.t, b.t), strings.Compare(a.file, b.file)) })
	return out, nil
}

func rowOf(ft fileTask, find func(string) (*queue.Task, bool)) Row {
	t := ft.t
	r := Row{Key: t.Key, ID: t.ID, Title: t.Title, Status: string(t.Status), Trust: string(t.Trust),
		Severity: string(t.Severity), Kind: string(t.Kind), Wave: t.Wave, Plan: t.Plan, Assignee: t.Assignee, Path: ft.file}
	if len(t.SuspectFiles) > 0 {
		r.File = t.SuspectFiles[0].String()
	}
	if !t.Status.Terminal() {
		r.BlockedBy = queue.Blockers(t, find)
	}
	return r
}

func lookup(all []fileTask) queue.Lookup {
	ts := make([]*queue.Task, len(all))
	for i, ft := range all {
		ts[i] = ft.t
	}
	return queue.NewLookup(ts)
}

// List lists tasks from the files.
func (f *Files) List(ctx context.Context, q ListQuery) (Page, error) {
	all, err := f.read()
	if err != nil {
		return Page{}, err
	}
	l := lookup(all)
	var p Page
	for _, ft := range all {
		t := ft.t
		switch {
		case len(q.Statuses) > 0 && !slices.Contains(q.Statuses, string(t.Status)):
			continue
		case len(q.Statuses) == 0 && !q.All && t.Status.Terminal():
			continue
		case q.Wave > 0 && t.Wave != q.Wave:
			continue
		}
		p.Rows = append(p.Rows, rowOf(ft, l.Find))
	}
	if q.Limit > 0 && len(p.Rows) > q.Limit {
		p.Rows = p.Rows[:q.Limit]
	}
	return p, nil
}

// Get reads one task from its file.
func (f *Files) Get(ctx context.Context, ref string) (*Detail, error) {
	all, err := f.read()
	if err != nil {
		return nil, err
	}
	l := lookup(all)
	t, ok := l.Find(ref)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	for _, ft := range all {
		if ft.t == t {
			det := &Detail{Row: rowOf(ft, l.Find), Body: string(t.Body)}
			det.Fill(t)
			det.DependsOn = slices.Clone(det.DependsOn)
			for i, dep := range det.DependsOn {
				if d, ok := l.Find(dep); ok && d.Key != "" {
					det.DependsOn[i] = d.Key
				}
			}
			return det, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
}

// Search matches every word of the query, case-insensitively, against each
// task's title, body and suspect files.
func (f *Files) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 {
		return nil, fmt.Errorf("search: empty query: give a word or two to look for")
	}
	all, err := f.read()
	if err != nil {
		return nil, err
	}
	l := lookup(all)
	hits := []Hit{}
	for _, ft := range all {
		hay := bytes.ToLower(append([]byte(ft.t.Title+"\n"), ft.t.Body...))
		ok := true
		for _, w := range words {
			if !bytes.Contains(hay, []byte(w)) {
				ok = false
				break
			}
		}
		if ok {
			hits = append(hits, Hit{Row: rowOf(ft, l.Find)})
		}
		if len(hits) == limit {
			break
		}
	}
	return hits, nil
}

// Claim fails: leases live in snagd.
func (f *Files) Claim(context.Context, string, bool, bool) (Claimed, error) {
	return Claimed{}, ErrNoDaemon
}

// Release fails: leases live in snagd.
func (f *Files) Release(context.Context, string, string) (Moved, error) { return Moved{}, ErrNoDaemon }

// Resolve fails: leases live in snagd.
func (f *Files) Resolve(context.Context, string, string, string) (Moved, error) {
	return Moved{}, ErrNoDaemon
}

// Add fails: snag writes only through snagd.
func (f *Files) Add(context.Context, NewTask) (Added, error) { return Added{}, ErrNoDaemon }
