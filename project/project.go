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
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/queue"
)

// Folder is the name of a project's snag folder.
const Folder = ".snag"

// Names of things inside the snag folder.
const (
	ConfigFile = "config.json"
	PlanFile   = "plan.json"
	DBFile     = "snag.db"
	PortFile   = ".port"
)

// Subfolders are created by [Init].
var Subfolders = []string{"tasks", "plans", "notes", "shots"}

// GitIgnore is the .gitignore snag init writes into .snag/: live and
// generated files stay out of git.
const GitIgnore = `# Written by snag init. The index, live state and generated files are
# per machine; the task files, plans, notes and shots are committed.
snag.db
snag.db-*
.port
snagd.lock
snagd.log
plan.json
*.snag-tmp
`

// ErrNoProject is returned by [Find] when no folder above dir has .snag/.
var ErrNoProject = errors.New("no .snag/ folder here or above: run snag init in the project's root")

// Home is the per-user snag folder (~/.snag, or $SNAG_HOME): it holds the
// token and approvals, and is never mistaken for a project.
func Home() string {
	if h := os.Getenv("SNAG_HOME"); h != "" {
		return h
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, Folder)
}

// Find walks up from dir to the first folder that holds .snag/, skipping the
// per-user folder ~/.snag, and returns that folder (the project root).
func Find(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	home := Home()
	for {
		cand := filepath.Join(dir, Folder)
		if fi, err := os.Stat(cand); err == nil && fi.IsDir() && !samePath(cand, home) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoProject
		}
		dir = parent
	}
}

func samePath(a, b string) bool {
	if b == "" {
		return false
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(fa, fb)
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// InitResult says what [Init] created.
type InitResult struct {
	Root    string
	Created []string // paths relative to the root, in creation order
}

// Init creates .snag/ in root with its subfolders, config.json and
// .gitignore. It is idempotent: what exists is left as it is.
func Init(root string) (InitResult, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return InitResult{}, err
	}
	res := InitResult{Root: root}
	snag := filepath.Join(root, Folder)
	if samePath(snag, Home()) {
		return res, fmt.Errorf("init: %s is snag's per-user folder, not a project: run snag init in a project", snag)
	}
	mk := func(rel string) error {
		p := filepath.Join(root, rel)
		if fi, err := os.Lstat(p); err == nil {
			if fi.Mode()&fs.ModeSymlink != 0 {
				return fmt.Errorf("init: %s %w", rel, queue.ErrSymlink)
			}
			return nil
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("init: %w", err)
		}
		res.Created = append(res.Created, rel+"/")
		return nil
	}
	if err := mk(Folder); err != nil {
		return res, err
	}
	for _, s := range Subfolders {
		if err := mk(filepath.Join(Folder, s)); err != nil {
			return res, err
		}
	}
	dir, err := queue.OpenDir(snag)
	if err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	defer dir.Close()
	for _, f := range []struct {
		name string
		data []byte
	}{
		{ConfigFile, queue.DefaultConfig().MarshalIndent()},
		{".gitignore", []byte(GitIgnore)},
	} {
		err := dir.Create(f.name, f.data)
		switch {
		case err == nil:
			res.Created = append(res.Created, filepath.Join(Folder, f.name))
		case errors.Is(err, fs.ErrExist):
		default:
			return res, fmt.Errorf("init: %w", err)
		}
	}
	return res, nil
}

// Project is an open project: its folders, config and index.
type Project struct {
	Root   string     // the folder that holds .snag/
	Snag   *queue.Dir // .snag/
	Tasks  *queue.Dir // .snag/tasks/
	DB     *index.DB
	Config queue.Config
	// cleanup removes a temporary private index ([OpenReader]) at Close.
	cleanup func()
}

// Open opens the project whose root is root: config, folders and index.
// The index is opened (and migrated), not yet synced: see [Project.Sync].
func Open(ctx context.Context, root string) (*Project, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	return openAt(ctx, root, filepath.Join(root, Folder, DBFile))
}

// Close closes the index and the folders.
func (p *Project) Close() error {
	err := errors.Join(p.DB.Close(), p.Tasks.Close(), p.Snag.Close())
	if p.cleanup != nil {
		p.cleanup()
	}
	return err
}

// Rel gives a path inside .snag/ as a person sees it from the root.
func (p *Project) Rel(path string) string { return Rel(path) }

// Rel gives the path, relative to the project root, of a path inside .snag/.
func Rel(path string) string {
	return filepath.ToSlash(filepath.Join(Folder, path))
}

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
