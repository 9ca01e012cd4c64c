package token

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadFileRefusesUnsafeOrShortSecrets: a hosted token file that is a
// link, open to others, short or not a header's bytes is refused with the
// fix, and no error carries the secret.
func TestReadFileRefusesUnsafeOrShortSecrets(t *testing.T) {
	good := strings.Repeat("ab", Size)
	cases := []struct {
		name  string
		setup func(t *testing.T, p string)
		want  string // "" for a good file
	}{
		{"good", func(t *testing.T, p string) { write(t, p, good+"\n", 0o600) }, ""},
		{"missing", func(t *testing.T, p string) {}, "openssl rand -hex 32"},
		{"readable by others", func(t *testing.T, p string) { write(t, p, good, 0o644) }, "chmod 600"},
		{"a symbolic link", func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "target")
			write(t, target, good, 0o600)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link"},
		{"a folder", func(t *testing.T, p string) { os.Mkdir(p, 0o700) }, "not a regular file"},
		{"31 bytes", func(t *testing.T, p string) { write(t, p, good[:31]+"\n", 0o600) }, "31 bytes, want at least 32"},
		{"a space inside", func(t *testing.T, p string) { write(t, p, good[:20]+" "+good[20:], 0o600) }, "Authorization header"},
		{"too large", func(t *testing.T, p string) { write(t, p, strings.Repeat("a", 5000), 0o600) }, "over 4096 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "hosted-token")
			c.setup(t, p)
			tok, err := ReadFile(p)
			if c.want == "" {
				if err != nil || !tok.Equal(good) {
					t.Fatalf("ReadFile: %v; want the token", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ReadFile: %v; want an error saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), good[:20]) {
				t.Errorf("the error carries the secret: %v", err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	if tok, err := Parse("  " + strings.Repeat("x", MinSize) + "\n"); err != nil || !tok.Equal(strings.Repeat("x", MinSize)) {
		t.Errorf("Parse of %d bytes: %v", MinSize, err)
	}
	for _, bad := range []string{"", strings.Repeat("y", MinSize-1), strings.Repeat("y", 20) + "\x00" + strings.Repeat("y", 20)} {
		_, err := Parse(bad)
		if err == nil {
			t.Errorf("Parse(%q) took it", bad)
		} else if strings.Contains(err.Error(), "yyyy") {
			t.Errorf("Parse's error carries the secret: %v", err)
		}
	}
}

func write(t *testing.T, p, s string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}
