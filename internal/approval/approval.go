// Package approval is the per-user record of the verify commands a person
// on this machine has approved, like direnv's allow. A verify command
// arrives in files a git pull can change (a task's verify.command, or the
// project's .snag/config.json), so snagd runs one only when [Store.Approved]
// says a person approved that exact command, for that project, run that way.
//
// An approval is one file in the store's folder (snag uses
// ~/.snag/approved/, or $SNAG_HOME/approved/), named by [Hash] of the scope,
// the shell flag and the exact command bytes, with a ".json" suffix. Its
// content, a JSON object {scope, command, shell, approved_at, by}, is there
// for listing, and is checked against the name when read: a file only
// counts when it is a regular file (not a symbolic link) owned by the
// current user, not writable by group or others, in a folder that is
// likewise, and its content hashes to its name. Anything else is not an
// approval, and the error says how to fix it.
//
// The scope is the project's identity, which the caller computes with
// [Scope]: the absolute, symlink-resolved project root (the folder that
// holds .snag/). Two checkouts or worktrees of one repository are two
// scopes, each approved on its own: a command approved for one place does
// not run in another.
//
// A Store is safe for concurrent use by several goroutines and processes:
// every write is a new file renamed into place.
//
// approval imports nothing of snag's but atomicfile.
package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snagdev/snag/internal/atomicfile"
)

// Version tags the hash of an approval. Changing how an approval is hashed
// means a new tag, which leaves every earlier approval unmatched: people
// approve again rather than trust something they did not see.
const Version = "snag-approval-v1"

// Folder is the name of the store's folder inside snag's per-user folder:
// snag approve and snagd both open
// approval.Open(filepath.Join(project.Home(), approval.Folder)).
const Folder = "approved"

// MinPrefix is the shortest hash prefix [Store.Revoke] accepts.
const MinPrefix = 4

// maxFile bounds an approval file's size: a command is a line or a few.
const maxFile = 1 << 20

// ErrNotFound is returned by [Store.Revoke] when no approval matches.
var ErrNotFound = errors.New("no such approval: snag approve --list shows them")

// Approval is one approved command.
type Approval struct {
	Hash    string    `json:"-"` // [Hash] of scope, shell and command; the file's name
	Scope   string    `json:"scope"`
	Command string    `json:"command"`
	Shell   bool      `json:"shell"`
	At      time.Time `json:"approved_at"`
	By      string    `json:"by"` // the OS user who approved it
}

// Hash identifies an approval: the hex SHA-256 of the version tag, the
// scope, whether the command runs through a shell, and the exact command
// bytes, each string prefixed by its length so no two inputs give the same
// bytes:
//
//	snag-approval-v1\n<len(scope)>:<scope>\n<shell 0|1>\n<len(command)>:<command>
func Hash(scope, command string, shell bool) string {
	sh := "0"
	if shell {
		sh = "1"
	}
	h := sha256.New()
	io.WriteString(h, Version+"\n"+strconv.Itoa(len(scope))+":"+scope+"\n"+sh+"\n"+strconv.Itoa(len(command))+":"+command)
	return hex.EncodeToString(h.Sum(nil))
}

// Scope is the scope of the project whose root (the folder holding .snag/)
// is root: the absolute path with every symbolic link resolved, so that
// every way of reaching one folder names the same scope. snag approve and
// snagd both compute it with this function.
func Scope(root string) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("approval: scope of %s: %w", root, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("approval: scope of %s: %w", root, err)
	}
	return resolved, nil
}

// Store is a folder of approvals.
type Store struct {
	dir string
}

// Open returns the store kept in dir. It touches nothing on disk: a missing
// folder is an empty store, created by the first [Store.Approve].
func Open(dir string) *Store { return &Store{dir: dir} }

// Dir is the store's folder.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(hash string) string { return filepath.Join(s.dir, hash+".json") }

// Approve records that the current user approved command, run with or
// without a shell, for scope. Approving again what is already approved
// changes nothing and returns the approval on record.
func (s *Store) Approve(scope, command string, shell bool) (Approval, error) {
	if strings.TrimSpace(command) == "" {
		return Approval{}, errors.New("approval: approve: the command is empty: there is nothing to approve")
	}
	if scope == "" {
		return Approval{}, errors.New("approval: approve: the scope is empty: pass the project's root through approval.Scope")
	}
	hash := Hash(scope, command, shell)
	if a, err := s.load(hash); err == nil {
		return a, nil
	}
	if err := s.makeDir(); err != nil {
		return Approval{}, err
	}
	a := Approval{Hash: hash, Scope: scope, Command: command, Shell: shell, At: time.Now().UTC().Truncate(time.Second), By: username()}
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return Approval{}, fmt.Errorf("approval: approve: %w", err)
	}
	if err := s.write(hash, append(data, '\n')); err != nil {
		return Approval{}, err
	}
	return a, nil
}

// Approved reports whether the current user approved exactly this command,
// run this way, for scope. No approval on record is (false, nil). A file
// that is there but does not check out (a symbolic link, someone else's,
// writable by others, content that does not match its name) is (false, err)
// with err naming the fix: callers treat every error as not approved.
func (s *Store) Approved(scope, command string, shell bool) (bool, error) {
	_, err := s.load(Hash(scope, command, shell))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

// List returns the approvals on record, oldest first. Files that do not
// check out are left out of the list and named, each with its fix, in the
// error returned beside it: a list with a non-nil error is still the list
// of what counts.
func (s *Store) List() ([]Approval, error) {
	if err := s.checkDir(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("approval: list %s: %w", s.dir, err)
	}
	var out []Approval
	var errs []error
	for _, de := range des {
		hash, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || !isHash(hash) {
			continue
		}
		a, err := s.load(hash)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Approval) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Hash, b.Hash)
	})
	return out, errors.Join(errs...)
}

// Revoke removes the approval whose hash starts with prefix (at least
// [MinPrefix] hex digits; the full hash of an approval is [Hash] of its
// scope, command and shell flag). It removes a file that does not check out
// as well, returning what it can read of it. No match is [ErrNotFound]; a
// prefix that matches several approvals is an error listing them.
func (s *Store) Revoke(prefix string) (Approval, error) {
	prefix = strings.ToLower(prefix)
	if len(prefix) < MinPrefix || len(prefix) > sha256.Size*2 || strings.Trim(prefix, "0123456789abcdef") != "" {
		return Approval{}, fmt.Errorf("approval: revoke %q: want at least %d hex digits of a hash: snag approve --list shows them", prefix, MinPrefix)
	}
	if err := s.checkDir(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Approval{}, ErrNotFound
		}
		return Approval{}, err
	}
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return Approval{}, fmt.Errorf("approval: revoke: %w", err)
	}
	var match []string
	for _, de := range des {
		hash, ok := strings.CutSuffix(de.Name(), ".json")
		if ok && isHash(hash) && strings.HasPrefix(hash, prefix) {
			match = append(match, hash)
		}
	}
	switch len(match) {
	case 0:
		return Approval{}, ErrNotFound
	case 1:
	default:
		return Approval{}, fmt.Errorf("approval: revoke %q: matches %d approvals (%s): give more digits", prefix, len(match), strings.Join(match, ", "))
	}
	a, err := s.load(match[0])
	if err != nil {
		a = Approval{Hash: match[0]}
	}
	if err := os.Remove(s.path(match[0])); err != nil {
		return Approval{}, fmt.Errorf("approval: revoke: %w", err)
	}
	atomicfile.SyncDir(s.dir) // the removal is done; durability is best effort
	return a, nil
}

// load reads and checks the approval named hash. A missing file is an error
// wrapping fs.ErrNotExist.
func (s *Store) load(hash string) (Approval, error) {
	if err := s.checkDir(); err != nil {
		return Approval{}, err
	}
	p := s.path(hash)
	fail := func(format string, args ...any) (Approval, error) {
		return Approval{}, fmt.Errorf("approval: %s: "+format, append([]any{p}, args...)...)
	}
	lfi, err := os.Lstat(p)
	if err != nil {
		return Approval{}, fmt.Errorf("approval: %w", err)
	}
	if lfi.Mode()&fs.ModeSymlink != 0 {
		return fail("is a symbolic link, which never counts as an approval: remove it and run snag approve again")
	}
	if !lfi.Mode().IsRegular() {
		return fail("is not a regular file: remove it and run snag approve again")
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return Approval{}, fmt.Errorf("approval: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Approval{}, fmt.Errorf("approval: %w", err)
	}
	if !os.SameFile(lfi, fi) {
		return fail("was replaced while being read: try again")
	}
	if err := checkOwner(fi, "remove it and run snag approve again"); err != nil {
		return fail("%v", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return Approval{}, fmt.Errorf("approval: %w", err)
	}
	if len(data) > maxFile {
		return fail("is over %d bytes, too big to be an approval: remove it and run snag approve again", maxFile)
	}
	var a Approval
	if err := json.Unmarshal(data, &a); err != nil {
		return fail("not an approval (%v): remove it and run snag approve again", err)
	}
	if Hash(a.Scope, a.Command, a.Shell) != hash {
		return fail("its content is not what its name says was approved: remove it and run snag approve again")
	}
	a.Hash = hash
	return a, nil
}

// checkDir checks the store's folder: a real folder, the user's own, that
// no one else can write to. A missing folder is an error wrapping
// fs.ErrNotExist.
func (s *Store) checkDir() error {
	fi, err := os.Lstat(s.dir)
	if err != nil {
		return fmt.Errorf("approval: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("approval: %s is a symbolic link: approvals live in a real folder; remove the link and run snag approve again", s.dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("approval: %s is not a folder: remove it and run snag approve again", s.dir)
	}
	if err := checkOwner(fi, "run chmod 700 "+s.dir); err != nil {
		return fmt.Errorf("approval: %s: %v", s.dir, err)
	}
	return nil
}

// checkOwner checks that fi is the current user's and writable by no one
// else.
func checkOwner(fi fs.FileInfo, fix string) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("belongs to user id %d, not to you (%d): remove it and run snag approve again", st.Uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("is writable by group or others (mode %v): %s", fi.Mode().Perm(), fix)
	}
	return nil
}

// makeDir creates the store's folder (and its parents) when missing.
func (s *Store) makeDir() error {
	err := s.checkDir()
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("approval: %w", err)
	}
	return s.checkDir()
}

// write puts data in place as hash's file, whole or not at all.
func (s *Store) write(hash string, data []byte) error {
	if err := atomicfile.WriteFile(s.path(hash), data, 0o600); err != nil {
		return fmt.Errorf("approval: %w", err)
	}
	return nil
}

func isHash(s string) bool {
	return len(s) == sha256.Size*2 && strings.Trim(s, "0123456789abcdef") == ""
}

// username is the OS user running this process.
func username() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "uid " + strconv.Itoa(os.Getuid())
}
