package project

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
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

// Build makes the index of the project whose root is root, .snag/snag.db,
// from the task files where there is none (see [index.Build]). Nothing may
// open the index until it returns. It writes no plan.json: snagd's first
// rescan asks for one, and [Project.WritePlan] writes it.
func Build(ctx context.Context, root string, opts index.BuildOptions) (index.ScanStats, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return index.ScanStats{}, err
	}
	return build(ctx, root, filepath.Join(root, Folder, DBFile), opts)
}

// build makes the index at dbPath from the task files of the project at
// root.
func build(ctx context.Context, root, dbPath string, opts index.BuildOptions) (index.ScanStats, error) {
	tasks, err := taskfs.OpenDir(filepath.Join(root, Folder, index.TasksFolder))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return index.ScanStats{}, fmt.Errorf("%w: run snag init to create it", err)
		}
		return index.ScanStats{}, err
	}
	defer tasks.Close()
	return index.Build(ctx, dbPath, tasks, opts)
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

// Name is an indexed task's file name in tasks/.
func Name(it *index.Item) string { return trimTasks(it.Path) }

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
