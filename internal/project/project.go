// Package project is a snag project on disk: the .snag/ folder's files and
// its index, opened together. It finds a project from a working directory,
// creates one (snag init), opens it, brings the index in step with the
// files and regenerates plan.json, and doctors it (snag doctor).
//
// Every change to the task files and the live state is the engine's
// (package engine), snagd's one writer; project only reads and indexes.
//
// project imports queue and index; it knows nothing of HTTP, fsnotify or MCP.
package project

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// Folder is the name of a project's snag folder.
const Folder = layout.Folder

// Names of things inside the snag folder.
const (
	ConfigFile = layout.ConfigFile
	PlanFile   = layout.PlanFile
	DBFile     = layout.DBFile
	PortFile   = layout.PortFile
)

// Subfolders are created by [Init].
var Subfolders = layout.Subfolders

// GitIgnore is the .gitignore snag init writes into .snag/.
const GitIgnore = layout.GitIgnore

// ErrNoProject is returned by [Find] when no folder above dir has .snag/.
var ErrNoProject = layout.ErrNoProject

// Home is the per-user snag folder (~/.snag, or $SNAG_HOME); see [layout.Home].
func Home() string { return layout.Home() }

// Find walks up from dir to the project root; see [layout.Find].
func Find(dir string) (string, error) { return layout.Find(dir) }

// InitResult says what [Init] created.
type InitResult = layout.InitResult

// Init creates .snag/ in root; see [layout.Init].
func Init(root string) (InitResult, error) { return layout.Init(root) }

// Project is an open project: its folders, config and index.
type Project struct {
	Root   string      // the folder that holds .snag/
	Snag   *taskfs.Dir // .snag/
	Tasks  *taskfs.Dir // .snag/tasks/
	DB     *index.DB
	Config queue.Config
	// Keys, when set, takes the next task key number, never below floor,
	// from the sequence of the repository's live state (the embedded
	// store, or a team's workspace); nil: the index's and the files' next
	// number alone.
	Keys func(ctx context.Context, floor int) (int, error)
	// cleanup removes a temporary private index ([OpenReader]) at Close.
	cleanup func()
}

// Open opens the project whose root is root: config, folders and index.
// The index is opened (and migrated), not yet synced: see [Project.Sync].
func Open(ctx context.Context, root string) (*Project, error) {
	return OpenConns(ctx, root, index.DefaultConns)
}

// OpenConns is [Open] keeping conns connections to the index
// (index.OpenConns).
func OpenConns(ctx context.Context, root string, conns int) (*Project, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	return openAt(ctx, root, filepath.Join(root, Folder, DBFile), conns)
}

// Close closes the index and the folders.
func (p *Project) Close() error {
	err := errors.Join(p.DB.Close(), p.Tasks.Close(), p.Snag.Close())
	if p.cleanup != nil {
		p.cleanup()
	}
	return err
}

// SideFolders opens the folders of .snag/ that snag writes whole files in
// besides tasks/ and .snag/ itself (plans/ and notes/, those there), for
// the sweep of the temp files a crash leaves; the caller closes them.
func (p *Project) SideFolders() []*taskfs.Dir {
	var out []*taskfs.Dir
	for _, name := range []string{queue.PlansFolder, queue.NotesFolder} {
		if d, err := taskfs.OpenDir(filepath.Join(p.Root, Folder, name)); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// Rel gives a path inside .snag/ as a person sees it from the root.
func (p *Project) Rel(path string) string { return Rel(path) }

// Rel gives the path, relative to the project root, of a path inside .snag/.
func Rel(path string) string { return layout.Rel(path) }

// Abs gives the absolute path of a path inside .snag/.
func (p *Project) Abs(path string) string {
	return filepath.Join(p.Root, Folder, filepath.FromSlash(path))
}

func trimTasks(path string) string { return strings.TrimPrefix(path, index.TasksFolder+"/") }

// KeyOf returns the alias of the task with the given id, or "".
func (p *Project) KeyOf(ctx context.Context, id string) string {
	if id == "" {
		return ""
	}
	it, err := p.DB.Get(ctx, queue.Ref{ID: id})
	if err != nil || it.Task == nil {
		return ""
	}
	return it.Task.Key
}
