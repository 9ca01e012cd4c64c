package coord

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Env names the variable that gives snagd the coordination store's DSN
// when --coord is not given.
const Env = "SNAG_COORD"

// FileName is the file in a repository's state folder (gitdir.State:
// .git/snag/coord, or .snag/coord outside git) that holds the DSN when
// neither --coord nor $SNAG_COORD gives one: snag team init in a
// repository writes it, so that repository joins and others stay alone.
// It must be mode 0600: it holds a password. Older versions kept it in
// the per-user folder (~/.snag/coord), where every project of the user
// found it; that file is no longer read (see [Legacy]).
const FileName = "coord"

// FindDSN returns the DSN snagd coordinates through, and where it came
// from: flag (the --coord value) when set, else $SNAG_COORD, else the file
// coord in state, the repository's state folder. It returns "" with no
// error when none is set: snagd then runs alone, with its live state in
// snag.db.
func FindDSN(flag, state string) (dsn, from string, err error) {
	if flag != "" {
		return flag, "--coord", nil
	}
	if v := os.Getenv(Env); v != "" {
		return v, "$" + Env, nil
	}
	p := filepath.Join(state, FileName)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("%s is not a regular file: replace it with one holding the DSN (snag team init DSN writes it)", p)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", "", fmt.Errorf("%s can be read by others (mode %04o) and holds a password: chmod 600 %s", p, fi.Mode().Perm(), p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", p, err)
	}
	dsn = strings.TrimSpace(string(b))
	if dsn == "" {
		return "", "", fmt.Errorf("%s is empty: write the DSN into it, or remove it to run without a coordination store (snag team leave)", p)
	}
	return dsn, p, nil
}

// Legacy returns the per-user DSN file of older versions (home/coord) when
// it is there, else "": it made every project of the user join, and is no
// longer read. Whoever finds it says so, with the fix: snag team init in
// each repository that should join, then remove the file.
func Legacy(home string) string {
	p := filepath.Join(home, FileName)
	if _, err := os.Lstat(p); err == nil {
		return p
	}
	return ""
}

// SaveDSN writes dsn into the file coord in state, the repository's state
// folder, mode 0600, for snagd to find (FindDSN).
func SaveDSN(state, dsn string) (string, error) {
	if err := os.MkdirAll(state, 0o755); err != nil {
		return "", fmt.Errorf("save the DSN: %w", err)
	}
	p := filepath.Join(state, FileName)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(dsn+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save the DSN: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("save the DSN: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("save the DSN: %w", err)
	}
	return p, nil
}

// Redact returns dsn with its password replaced by "xxxxx": the form a
// DSN may take in a log, an error or an answer. It handles both URLs
// (postgres://user:pw@host/db) and key=value strings (password=pw).
func Redact(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		u, err := url.Parse(dsn)
		if err != nil {
			// Not a URL that parses: nothing of it is shown but the scheme.
			return dsn[:i] + "://(a DSN that does not parse)"
		}
		if u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			}
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

var urlPassword = regexp.MustCompile(`://[^:/@]*:([^@]*)@`)

var kvPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// password returns dsn's password, or "" when it has none.
func password(dsn string) string {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			if m := urlPassword.FindStringSubmatch(dsn); m != nil {
				return m[1]
			}
			return ""
		}
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				return p
			}
		}
		return u.Query().Get("password")
	}
	if m := kvPassword.FindStringSubmatch(dsn); m != nil {
		return strings.Trim(m[2], "'")
	}
	return ""
}

// scrub is err with every trace of the DSN's password removed: the errors
// of the driver may quote the connection string.
type scrub struct {
	err    error
	secret string
}

func (s scrub) Error() string {
	msg := s.err.Error()
	if s.secret != "" {
		msg = strings.ReplaceAll(msg, s.secret, "xxxxx")
		msg = strings.ReplaceAll(msg, url.QueryEscape(s.secret), "xxxxx")
		msg = strings.ReplaceAll(msg, url.PathEscape(s.secret), "xxxxx")
	}
	return msg
}

func (s scrub) Unwrap() error { return s.err }
