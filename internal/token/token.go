// Package token keeps the per-user secret that guards snagd's API:
// ~/.snag/token (or $SNAG_HOME/token), 32 random bytes written as hex,
// created with O_EXCL and mode 0600 in a 0700 folder.
//
// A token file that is a symbolic link, belongs to another user, or can be
// read by others is refused with the chmod or chown that fixes it: a secret
// anyone on the machine can read guards nothing.
//
// token imports nothing of snag's but atomicfile.
package token

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/snagdev/snag/internal/atomicfile"
)

// FileName is the token's file name inside the per-user folder.
const FileName = "token"

// Size is the number of random bytes in a token.
const Size = 32

// Token is the secret: compare with [Token.Equal], never with ==.
type Token struct {
	secret string // hex
}

// String returns the token as it goes in an Authorization header. Never log it.
func (t Token) String() string { return t.secret }

// Equal reports whether presented is the token. It hashes both sides first
// and compares the hashes in constant time, so neither the length nor the
// content of the token leaks through timing.
func (t Token) Equal(presented string) bool {
	a := sha256.Sum256([]byte(t.secret))
	b := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1 && t.secret != ""
}

// Proof is the HMAC-SHA256 of nonce under the token, hex: what /health
// answers so a client can tell the real daemon from a squatter on its port
// before it sends the token.
func (t Token) Proof(nonce string) string {
	m := hmac.New(sha256.New, []byte(t.secret))
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// CheckProof reports whether proof is the right answer to nonce.
func (t Token) CheckProof(nonce, proof string) bool {
	want, err := hex.DecodeString(t.Proof(nonce))
	if err != nil {
		return false
	}
	got, err := hex.DecodeString(proof)
	return err == nil && hmac.Equal(want, got)
}

// Load reads the token in dir (the per-user folder), creating the folder and
// the token when they do not exist. It refuses files that are unsafe.
func Load(dir string) (Token, error) {
	if err := checkDir(dir, true); err != nil {
		return Token{}, err
	}
	p := filepath.Join(dir, FileName)
	t, err := read(p)
	if errors.Is(err, fs.ErrNotExist) {
		if err := create(p); err != nil && !errors.Is(err, fs.ErrExist) {
			return Token{}, err
		}
		return read(p)
	}
	return t, err
}

// Read reads the token in dir without creating anything: for clients.
func Read(dir string) (Token, error) {
	if err := checkDir(dir, false); err != nil {
		return Token{}, err
	}
	return read(filepath.Join(dir, FileName))
}

// Rotate replaces the token in dir with a fresh one. Clients holding the old
// one are refused from then on.
func Rotate(dir string) (Token, error) {
	if err := checkDir(dir, true); err != nil {
		return Token{}, err
	}
	p := filepath.Join(dir, FileName)
	if _, err := read(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Token{}, err
	}
	secret, err := newSecret()
	if err != nil {
		return Token{}, err
	}
	if err := atomicfile.WriteFile(p, secret, 0o600); err != nil {
		return Token{}, fmt.Errorf("rotate token: %w", err)
	}
	return read(p)
}

func checkDir(dir string, mk bool) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) && mk {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("token: create %s: %w: set $SNAG_HOME to a folder you can write (the token and the per-user files live there)", dir, err)
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("token: %s is a symbolic link: make it a real folder (rm %s && mkdir -m 700 %s)", dir, dir, dir)
	case !fi.IsDir():
		return fmt.Errorf("token: %s is not a folder", dir)
	case !ownedByMe(fi):
		return fmt.Errorf("token: %s belongs to another user: chown %d %s", dir, os.Getuid(), dir)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("token: %s is open to other users (mode %04o): chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	return nil
}

func read(p string) (Token, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return Token{}, fmt.Errorf("token: %w", err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return Token{}, fmt.Errorf("token: %s is a symbolic link: remove it and run snag token rotate", p)
	case !fi.Mode().IsRegular():
		return Token{}, fmt.Errorf("token: %s is not a regular file: remove it and run snag token rotate", p)
	case !ownedByMe(fi):
		return Token{}, fmt.Errorf("token: %s belongs to another user: remove it and run snag token rotate", p)
	case fi.Mode().Perm()&0o077 != 0:
		return Token{}, fmt.Errorf("token: %s is readable by others (mode %04o): chmod 600 %s, then snag token rotate (it may have been read)", p, fi.Mode().Perm(), p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Token{}, fmt.Errorf("token: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if raw, err := hex.DecodeString(s); err != nil || len(raw) != Size {
		return Token{}, fmt.Errorf("token: %s is not %d hex-encoded bytes: run snag token rotate", p, Size)
	}
	return Token{secret: s}, nil
}

// newSecret is a fresh token as its file holds it.
func newSecret() ([]byte, error) {
	var raw [Size]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	return []byte(hex.EncodeToString(raw[:]) + "\n"), nil
}

// create writes a fresh token to p, which must not exist: of several
// processes creating it at once, one wins and the others read its token.
func create(p string) error {
	secret, err := newSecret()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	_, werr := f.Write(secret)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(p)
		return fmt.Errorf("token: write %s: %w", p, err)
	}
	return nil
}

func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Getuid()
}
