package project

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
)

// Renumbering settles a key that two tasks (two ids) share, as a merge, a
// pull or a hand-written file leaves it: the task created first keeps the
// key (the smaller id when two were created in the same instant), and each
// other gets a new key, written into its key: line alone (the rest of its
// bytes stay as they are), its file renamed to match. Its id never changes.
// Every clone that sees the same files makes the same choice.

// Renumbering is one task that keeps a shared key's place to another: the
// task whose key changes, and the one that keeps it.
type Renumbering struct {
	ID, Key, Path  string // the task that gets a new key: its id, the shared key, its file
	KeptBy, Keeper string // the id of the task that keeps the key, and its file
}

// SharedKeys lists, in key order, the tasks that must give up a key they
// share with a task created before them: from the index's problem rows
// (rows marked duplicate) and each task's created time, read through get.
// A key whose files include two with one id (a copied file) is left to a
// person: which copy is the task is not snag's to guess.
func SharedKeys(ctx context.Context, rows []*index.Row, get func(queue.Ref) (*index.Item, error)) []Renumbering {
	byKey := map[string][]*index.Row{}
	seen := map[string]int{}
	for _, r := range rows {
		if r.Duplicate && r.State == snag.StateOK && r.ID != "" && r.Key != "" {
			byKey[r.Key] = append(byKey[r.Key], r)
			seen[r.ID]++
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		na, _ := queue.AliasNumber(a)
		nb, _ := queue.AliasNumber(b)
		return na - nb
	})
	var out []Renumbering
	for _, k := range keys {
		rs := byKey[k]
		if len(rs) < 2 || slices.ContainsFunc(rs, func(r *index.Row) bool { return seen[r.ID] > 1 }) {
			continue
		}
		type task struct {
			row     *index.Row
			created time.Time
		}
		ts := make([]task, 0, len(rs))
		for _, r := range rs {
			var created time.Time
			if it, err := get(queue.Ref{ID: r.ID}); err == nil && it.Task != nil {
				created = it.Task.Created
			}
			ts = append(ts, task{r, created})
		}
		slices.SortFunc(ts, func(a, b task) int {
			// A task with no created time counts as made last.
			switch {
			case a.created.IsZero() != b.created.IsZero():
				if a.created.IsZero() {
					return 1
				}
				return -1
			case !a.created.Equal(b.created):
				return a.created.Compare(b.created)
			}
			return strings.Compare(a.row.ID, b.row.ID)
		})
		for _, t := range ts[1:] {
			out = append(out, Renumbering{ID: t.row.ID, Key: k, Path: t.row.Path, KeptBy: ts[0].row.ID, Keeper: ts[0].row.Path})
		}
	}
	return out
}

// Renumber gives the task of r the key newKey: its key: line is edited in
// place (the file's other bytes kept) when the file still holds that task
// under the shared key, then the file is renamed to the new key's name. It
// returns the file's new name in tasks/, or "" when the file changed
// meanwhile and was left alone (the next look decides again). A rename that
// fails leaves the file under its old name with its new key, which is only
// a name: the key is what the file says.
func Renumber(tasks *taskfs.Dir, r Renumbering, newKey string) (newName string, err error) {
	name := path.Base(r.Path)
	var title string
	_, _, err = tasks.Update(name, func(cur []byte) ([]byte, error) {
		title = ""
		t, err := codec.Parse(cur)
		if err != nil || t.ID != r.ID || t.Key != r.Key {
			return cur, nil
		}
		title = t.Title
		return codec.Edit(cur, codec.Set("key", newKey))
	})
	if err != nil {
		return "", fmt.Errorf("renumber %s: %w", r.Path, err)
	}
	if title == "" {
		return "", nil
	}
	newName = queue.FileName(newKey, title)
	if err := tasks.Rename(name, newName); err != nil {
		return name, fmt.Errorf("renumber %s: the key is %s now, but the file keeps its name: %w", r.Path, newKey, err)
	}
	return newName, nil
}

// Dependents lists the tasks whose depends_on names key, by key, from the
// snapshot tasks: after a renumbering they may have meant either task.
func Dependents(tasks []queue.Located, key string) []string {
	var out []string
	for _, l := range tasks {
		if slices.Contains(l.Task.DependsOn, key) {
			out = append(out, l.Task.Key)
		}
	}
	slices.Sort(out)
	return out
}
