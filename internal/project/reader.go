package project

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// CacheEnv, when set, is the folder that holds the private indexes of
// [OpenReader] instead of the user's cache folder.
const CacheEnv = "SNAG_CACHE"

// OpenReader opens the project at root for reading when no snagd serves it.
// It leaves .snag/snag.db alone: that holds live state only snagd writes, so
// the index it reads is a private one, a cache of the task files kept per
// user and per project (in $SNAG_CACHE, or the user's cache folder:
// ~/.cache/snag/index/ on Linux), brought up to date from the files before
// it returns. The one thing it may write into the project is plan.json, the
// generated snapshot for readers without a daemon, when it is missing or
// the files changed (atomically, as snagd does). Readers started at once take turns at that update
// (a lock beside the cache), so none fails from another; the queries after
// it run side by side. The index opened is the cache, not snag.db: use it to
// read tasks, never for live state or the audit log.
func OpenReader(ctx context.Context, root string) (*Project, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	dbPath, cleanup, err := cachePath(root)
	if err != nil {
		return nil, err
	}
	unlock, err := lockFile(ctx, dbPath+".lock")
	if err != nil {
		cleanup()
		return nil, err
	}
	defer unlock()
	built := buildCache(ctx, root, dbPath)
	p, err := openAt(ctx, root, dbPath, index.DefaultConns)
	if errors.Is(err, index.ErrCorrupt) {
		// A cache can always be rebuilt: start it afresh.
		for _, sfx := range []string{"", "-wal", "-shm"} {
			os.Remove(dbPath + sfx)
		}
		built = buildCache(ctx, root, dbPath)
		p, err = openAt(ctx, root, dbPath, index.DefaultConns)
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	p.cleanup = cleanup
	st, err := p.Sync(ctx, false)
	if err == nil && built && !st.Changed() {
		// The build read every file, so the sync found nothing new; the
		// files may still differ from plan.json.
		err = p.WritePlan(ctx)
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// buildCache makes the private index at dbPath from the task files when
// there is none (index.Build), which is faster than filling an empty one,
// and reports whether it did. A build that fails leaves no file: the open
// after it makes an empty one, which the sync fills, and reports what is
// wrong.
func buildCache(ctx context.Context, root, dbPath string) bool {
	if fi, err := os.Stat(dbPath); err == nil && fi.Size() > 0 || err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_, err := build(ctx, root, dbPath, index.BuildOptions{})
	return err == nil
}

// cachePath is where the private index of the project at root lives. When
// the user has no cache folder it is a fresh temporary one, removed by the
// cleanup it returns.
func cachePath(root string) (path string, cleanup func(), err error) {
	sum := sha256.Sum256([]byte(root))
	name := hex.EncodeToString(sum[:12]) + ".db"
	dir := os.Getenv(CacheEnv)
	if dir == "" {
		if base, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(base, "snag", "index")
		}
	}
	if dir != "" {
		// A cache folder that is there but cannot be written (a read-only
		// $HOME, as some sandboxes mount it) is passed over for a
		// temporary one, as a missing one is: a read needs no cache.
		if err := os.MkdirAll(dir, 0o700); err == nil && syscall.Access(dir, 2 /* W_OK */) == nil {
			return filepath.Join(dir, name), func() {}, nil
		}
	}
	tmp, err := os.MkdirTemp("", "snag-index-")
	if err != nil {
		return "", nil, fmt.Errorf("read without snagd: no folder for a private index: %w", err)
	}
	return filepath.Join(tmp, name), func() { os.RemoveAll(tmp) }, nil
}

// lockFile takes an exclusive lock on the file at path, waiting for another
// process's until ctx ends. The returned function releases it.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("read without snagd: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("read without snagd: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// openAt opens the project at root with its index at dbPath.
func openAt(ctx context.Context, root, dbPath string, conns int) (*Project, error) {
	p := &Project{Root: root}
	snagPath := filepath.Join(root, Folder)
	cfg, err := queue.LoadConfig(filepath.Join(snagPath, ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("%w (fix it in .snag/%s; docs/format.md lists the keys)", err, ConfigFile)
	}
	p.Config = cfg
	if p.Snag, err = taskfs.OpenDir(snagPath); err != nil {
		return nil, err
	}
	if p.Tasks, err = taskfs.OpenDir(filepath.Join(snagPath, "tasks")); err != nil {
		p.Snag.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: run snag init to create it", err)
		}
		return nil, err
	}
	if p.DB, err = index.OpenConns(ctx, dbPath, conns); err != nil {
		p.Tasks.Close()
		p.Snag.Close()
		return nil, err
	}
	return p, nil
}
