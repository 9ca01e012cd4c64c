package index

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/queue"
)

// maxUnseenReads bounds how many files the index has not seen yet
// [DB.DiskKeys] opens to read their key: a bulk change (a git checkout) is
// the rescan's work, and its file names still carry their keys.
const maxUnseenReads = 2000

// DiskKeys says which alias numbers the task files in dir use right now,
// whether or not the index has seen them yet (the watcher may lag behind a
// person's save by a moment): the number in each file's name (SNAG-12 - ...),
// and, for a file the index has no row for, the key in its frontmatter too.
// It maps each number to the names that use it.
func (db *DB) DiskKeys(ctx context.Context, dir *queue.Dir) (map[int][]string, error) {
	names, err := dir.Names()
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(names))
	err = db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT path FROM tasks`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error {
				known[strings.TrimPrefix(s.ColumnText(0), TasksFolder+"/")] = true
				return nil
			}})
	})
	if err != nil {
		return nil, fmt.Errorf("disk keys: %w", err)
	}
	used := map[int][]string{}
	reads := 0
	for _, name := range names {
		if n, ok := keyNumFromName(name).(int64); ok {
			used[int(n)] = append(used[int(n)], name)
		}
		if known[name] || reads >= maxUnseenReads {
			continue
		}
		reads++
		raw, _, err := dir.Read(name)
		if err != nil {
			continue // gone or not a regular file: nothing to hold
		}
		if n := frontmatterKey(raw); n > 0 {
			if k, ok := keyNumFromName(name).(int64); !ok || int(k) != n {
				used[n] = append(used[n], name)
			}
		}
	}
	return used, nil
}

// frontmatterKey reads the number of the key: line of a task file's
// frontmatter without parsing the rest, so a file still being written, or
// one that does not parse, holds its key as well. It returns 0 when there is
// none.
func frontmatterKey(raw []byte) int {
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	if len(raw) > queue.MaxFrontmatterSize {
		raw = raw[:queue.MaxFrontmatterSize]
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
func (db *DB) NextFreeKey(ctx context.Context, dir *queue.Dir) (int, error) {
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
