package token

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// MinSize is the fewest bytes a secret made by hand (snagd's hosted token)
// may have: as many as snag's own tokens have random bytes.
const MinSize = Size

// maxSecret bounds what ReadFile reads: a secret is a line, not a file.
const maxSecret = 4096

// MakeCommand is a shell command that writes a fresh secret to path,
// readable by its owner only.
func MakeCommand(path string) string {
	return fmt.Sprintf("(umask 077; openssl rand -hex %d > %s); chmod 600 %s", Size, path, path)
}

// Parse makes a Token of a secret made by hand, as an environment variable
// holds it: surrounding white space is dropped, and what is left must be at
// least MinSize bytes of printable ASCII without spaces (it goes in an
// Authorization header). Its errors never contain the secret.
func Parse(secret string) (Token, error) {
	s, err := check(secret)
	if err != nil {
		return Token{}, fmt.Errorf("token: %w: make one with openssl rand -hex %d", err, Size)
	}
	return Token{secret: s}, nil
}

// check is secret without its surrounding white space, or what is wrong
// with it, in words that do not contain it.
func check(secret string) (string, error) {
	s := strings.TrimSpace(secret)
	if len(s) < MinSize {
		return "", fmt.Errorf("%d bytes, want at least %d", len(s), MinSize)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return "", fmt.Errorf("a byte (at %d) that cannot go in an Authorization header (want printable ASCII without spaces)", i+1)
		}
	}
	return s, nil
}

// ReadFile reads a secret made by hand from the file at path, as [Parse]
// takes it. The file must be a regular file, not a symbolic link, the
// user's own and readable by no one else; it is opened without following a
// link and checked once open, so it cannot be swapped between the check
// and the read. Its errors name the fix and never contain the secret.
func ReadFile(path string) (Token, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return Token{}, fmt.Errorf("token: %s is a symbolic link: name the file itself, a regular file of mode 0600", path)
	case errors.Is(err, os.ErrNotExist):
		return Token{}, fmt.Errorf("token: %s does not exist: make it with %s", path, MakeCommand(path))
	case err != nil:
		return Token{}, fmt.Errorf("token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Token{}, fmt.Errorf("token: %w", err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return Token{}, fmt.Errorf("token: %s is not a regular file: make one with %s", path, MakeCommand(path))
	case !ownedByMe(fi):
		return Token{}, fmt.Errorf("token: %s belongs to another user: make one of your own with %s", path, MakeCommand(path))
	case fi.Mode().Perm()&0o077 != 0:
		return Token{}, fmt.Errorf("token: %s is readable by others (mode %04o): chmod 600 %s, and put a new token in it (openssl rand -hex %d), since this one may have been read",
			path, fi.Mode().Perm(), path, Size)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecret+1))
	if err != nil {
		return Token{}, fmt.Errorf("token: read %s: %w", path, err)
	}
	if len(b) > maxSecret {
		return Token{}, fmt.Errorf("token: %s is over %d bytes, not a token: make one with %s", path, maxSecret, MakeCommand(path))
	}
	secret, err := check(string(b))
	if err != nil {
		return Token{}, fmt.Errorf("token: %s holds %w: make a new one with %s", path, err, MakeCommand(path))
	}
	return Token{secret: secret}, nil
}
