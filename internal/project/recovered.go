package project

import (
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/snagdev/snag/internal/taskfs"
)

// RecoveredFolder, in .snag/, keeps bytes of a person's save that snag
// could not put back in its task file: a save in place that could not be
// merged with snag's write, or one a crash left in a hidden temp file.
const RecoveredFolder = "recovered"

// KeepAside writes data, the bytes of a save of the task file name, into
// .snag/recovered/ under a fresh name that starts with the time, and
// returns that name relative to .snag/.
func (p *Project) KeepAside(name string, data []byte) (string, error) {
	folder := filepath.Join(p.Root, Folder, RecoveredFolder)
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return "", err
	}
	dir, err := taskfs.OpenDir(folder)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	saved := time.Now().UTC().Format("20060102T150405.000000Z") + " " + name
	if err := dir.Create(saved, data); err != nil {
		return "", err
	}
	return path.Join(RecoveredFolder, saved), nil
}
