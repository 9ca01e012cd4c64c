package index

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// maxUnseenReads bounds how many files [DB.DiskKeys] opens to read their
// key: a bulk change (a git checkout) is the rescan's work, and its file
// names still carry their keys.
const maxUnseenReads = 2000

// DiskKeys says which alias numbers above the highest the index has seen
// the task files in dir use right now, whether or not the index has seen
// those files yet (the watcher may lag behind a person's save by a moment):
// the number in a file's name (SNAG-12 - ...), and the key in the
// frontmatter of a file whose name carries a number that high, or none and
// the index has no row for it. It maps each number to the names that use
// it. Numbers up to the index's highest are left out: a new key is always
// above them. It costs one listing of the folder's names, and a read only
// of the few files the index has not seen.
func (db *DB) DiskKeys(ctx context.Context, dir *taskfs.Dir) (map[int][]string, error) {
	names, err := dir.Names()
	if err != nil {
		return nil, err
	}
	used := map[int][]string{}
	var top int
	err = db.withConn(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `SELECT coalesce(max(key_num), 0) FROM tasks`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error { top = s.ColumnInt(0); return nil }})
		if err != nil {
			return err
		}
		reads := 0
		for _, name := range names {
			n := 0
			if k, ok := keyNumFromName(name).(int64); ok {
				n = int(k)
			}
			switch {
			case n > top:
				used[n] = append(used[n], name)
			case n > 0:
				continue // at or below the index's highest: never handed out again
			default:
				var known bool
				err := sqlitex.Execute(conn, `SELECT 1 FROM tasks WHERE path = :path`, &sqlitex.ExecOptions{
					Named:      map[string]any{":path": TasksFolder + "/" + name},
					ResultFunc: func(*sqlite.Stmt) error { known = true; return nil }})
				if err != nil {
					return err
				}
				if known {
					continue // its key, if any, is in the index
				}
			}
			if reads >= maxUnseenReads {
				continue
			}
			reads++
			raw, _, err := dir.Read(name)
			if err != nil {
				continue // gone or not a regular file: nothing to hold
			}
			if k := frontmatterKey(raw); k > top && k != n {
				used[k] = append(used[k], name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("disk keys: %w", err)
	}
	return used, nil
}

// frontmatterKey reads the number of the key: line of a task file's
// frontmatter without parsing the rest, so a file still being written, or
// one that does not parse, holds its key as well. It returns 0 when there is
// none.
func frontmatterKey(raw []byte) int {
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	if len(raw) > codec.MaxFrontmatterSize {
		raw = raw[:codec.MaxFrontmatterSize]
	}
	first := true
	for len(raw) > 0 {
		var line []byte
		line, raw, _ = bytes.Cut(raw, []byte("\n"))
		line = bytes.TrimRight(line, "\r")
		if first {
			if string(line) != "---" {
				return 0
			}
			first = false
			continue
		}
		if s := string(line); s == "---" || s == "..." {
			return 0
		}
		v, ok := bytes.CutPrefix(line, []byte("key:"))
		if !ok {
			continue
		}
		s := strings.TrimSpace(string(v))
		if i := strings.Index(s, " #"); i >= 0 {
			s = strings.TrimSpace(s[:i])
		}
		if uq, err := strconv.Unquote(s); err == nil {
			s = uq
		} else {
			s = strings.Trim(s, "'")
		}
		n, _ := queue.AliasNumber(s)
		return n
	}
	return 0
}

// NextFreeKey reserves the next alias number no task file uses: one more
// than the highest the index has seen, reserved before ([DB.NextKey]), or
// that a file in dir uses by its name or, when the index has not seen it
// yet, its frontmatter ([DB.DiskKeys]). Reservations are durable, so two
// writers never get the same number.
func (db *DB) NextFreeKey(ctx context.Context, dir *taskfs.Dir) (int, error) {
	used, err := db.DiskKeys(ctx, dir)
	if err != nil {
		return 0, err
	}
	floor := 0
	for n := range used {
		floor = max(floor, n)
	}
	var n int
	err = db.write(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `SELECT max(coalesce((SELECT max(key_num) FROM tasks), 0),
			coalesce((SELECT CAST(v AS INTEGER) FROM meta WHERE k = 'last_key'), 0), :floor) + 1`,
			&sqlitex.ExecOptions{Named: map[string]any{":floor": floor},
				ResultFunc: func(s *sqlite.Stmt) error { n = s.ColumnInt(0); return nil }})
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, `INSERT INTO meta (k, v) VALUES ('last_key', :n)
			ON CONFLICT (k) DO UPDATE SET v = excluded.v`, &sqlitex.ExecOptions{Named: map[string]any{":n": strconv.Itoa(n)}})
	})
	if err != nil {
		return 0, fmt.Errorf("next key: %w", err)
	}
	return n, nil
}

// GiveBackKey returns n, reserved by NextFreeKey for an add that was then
// refused, when no number was reserved after it.
func (db *DB) GiveBackKey(ctx context.Context, n int) error {
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `UPDATE meta SET v = :prev WHERE k = 'last_key' AND v = :n`,
			&sqlitex.ExecOptions{Named: map[string]any{":n": strconv.Itoa(n), ":prev": strconv.Itoa(n - 1)}})
	})
	if err != nil {
		return fmt.Errorf("give back key %d: %w", n, err)
	}
	return nil
}

// HighestKey is the highest alias number the index knows of: its tasks'
// and the last one reserved ([DB.NextFreeKey]). It reserves nothing.
func (db *DB) HighestKey(ctx context.Context) (int, error) {
	n := 0
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT max(coalesce((SELECT max(key_num) FROM tasks), 0),
			coalesce((SELECT CAST(v AS INTEGER) FROM meta WHERE k = 'last_key'), 0))`,
			&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { n = s.ColumnInt(0); return nil }})
	})
	if err != nil {
		return 0, fmt.Errorf("highest key: %w", err)
	}
	return n, nil
}
