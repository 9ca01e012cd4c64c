package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/snagdev/snag/project"
)

// errDone ends Run without an error: the daemon has no reason to go on.
var errDone = errors.New("snagd: nothing left to serve")

// lifetime stops the daemon when it has no reason to run, so no snagd is
// left behind serving nothing: its project's .snag/ folder is gone or
// replaced (a removed worktree), or, with Options.ExitIdle, nothing used it
// for that long: no agent's session stream open and no request but
// /health (which other projects' clients probe).
func (d *Daemon) lifetime(ctx context.Context) error {
	folder := filepath.Join(d.root, project.Folder)
	first, err := inode(folder)
	if err != nil {
		return nil // Run checked the folder; nothing to watch without it
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if now, err := inode(folder); err != nil || now != first {
			d.log.Warn("the project's .snag/ folder is gone or replaced: stopping", "root", d.root)
			return errDone
		}
		if !d.e.Ready() {
			d.lastUse.Store(time.Now().UnixNano()) // idleness counts from ready
			continue
		}
		if d.opts.ExitIdle > 0 && d.e.Streams() == 0 && time.Since(time.Unix(0, d.lastUse.Load())) > d.opts.ExitIdle {
			d.log.Info("idle: no agent connected and no request: stopping", "idle_for", d.opts.ExitIdle.String())
			return errDone
		}
	}
}

// inode identifies a folder, so one removed and made again is told apart.
func inode(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, nil
	}
	return st.Ino, nil
}
