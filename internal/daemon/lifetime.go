package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/snagdev/snag/internal/project"
)

// errDone ends Run without an error: the daemon has no reason to go on.
var errDone = errors.New("snagd: nothing left to serve")

// lifetime ends the view when its project's .snag/ folder is gone or
// replaced (a removed worktree), so no view is left serving nothing.
func (d *Daemon) lifetime(ctx context.Context) error {
	folder := filepath.Join(d.root, project.Folder)
	first, err := inode(folder)
	if err != nil {
		return nil // the view's start checked the folder; nothing to watch without it
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
			d.log.Warn("the project's .snag/ folder is gone or replaced: its view stops", "root", d.root)
			return errDone
		}
		if !d.e.Ready() {
			d.lastUse.Store(time.Now().UnixNano()) // idleness counts from ready
		}
	}
}

// lifetime stops snagd when it has no reason to run, so no snagd is left
// behind serving nothing: its last view has ended, or, with
// Options.ExitIdle, nothing used any view for that long: no agent's
// session stream open and no request but /health (which other projects'
// clients probe).
func (h *host) lifetime(ctx context.Context) error {
	empty := h.empty
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-empty:
			h.log.Info("no worktree left to serve: stopping")
			return errDone
		case <-tick.C:
		}
		if h.opts.ExitIdle <= 0 {
			continue
		}
		// Counted before it looks: a test that read the count at a moment
		// and sees it grow knows a check has looked since.
		h.idleChecks.Add(1)
		if h.idle(h.opts.ExitIdle) {
			h.log.Info("idle: no agent connected and no request: stopping", "idle_for", h.opts.ExitIdle.String())
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
