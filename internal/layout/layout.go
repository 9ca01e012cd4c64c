// Package layout is where a snag project lives on disk: the .snag/ folder
// and the names inside it, finding a project from a working directory,
// creating one (snag init), and the per-user folder ~/.snag. It opens no
// index: the snag command line, which must start in milliseconds, uses it,
// and package project, which opens the index, re-exports it.
//
// layout imports queue and taskfs alone of snag's packages.
package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
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
snagd.log.*
plan.json
*.snag-tmp
keys
keys.lock
coord
clone-id
live.db
live.db-*
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
				return fmt.Errorf("init: %s %w", rel, taskfs.ErrSymlink)
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
	dir, err := taskfs.OpenDir(snag)
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

// Rel gives the path, relative to the project root, of a path inside .snag/.
func Rel(path string) string {
	return filepath.ToSlash(filepath.Join(Folder, path))
}
