package token

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadCreatesOnceAndRereads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".snag")
	a, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Equal(b.String()) {
		t.Fatal("second Load gave a different token")
	}
	fi, _ := os.Stat(filepath.Join(dir, FileName))
	di, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("modes: token %04o, folder %04o; want 0600 and 0700", fi.Mode().Perm(), di.Mode().Perm())
	}
	if len(a.String()) != 2*Size {
		t.Errorf("token is %d characters; want %d hex", len(a.String()), 2*Size)
	}
}

func TestEqual(t *testing.T) {
	tok, err := Load(filepath.Join(t.TempDir(), ".snag"))
	if err != nil {
		t.Fatal(err)
	}
	s := tok.String()
	for _, bad := range []string{"", s[:10], s + "x", "x" + s, strings.ToUpper(s), strings.Repeat("a", 1<<20)} {
		if tok.Equal(bad) {
			t.Errorf("Equal(%.20q...) = true", bad)
		}
	}
	if !tok.Equal(s) {
		t.Error("Equal(token) = false")
	}
	if (Token{}).Equal("") {
		t.Error("the zero token equals the empty string")
	}
}

func TestProof(t *testing.T) {
	tok, _ := Load(filepath.Join(t.TempDir(), ".snag"))
	other, _ := Load(filepath.Join(t.TempDir(), ".snag"))
	p := tok.Proof("nonce-1")
	if !tok.CheckProof("nonce-1", p) || tok.CheckProof("nonce-2", p) || other.CheckProof("nonce-1", p) || tok.CheckProof("nonce-1", "zz") {
		t.Error("proofs do not tell tokens and nonces apart")
	}
}

// TestX5_UnsafeTokenFilesAreRefused: a token folder or file others can
// read, or a link, is refused and the error names the fix.
func TestX5_UnsafeTokenFilesAreRefused(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		fix   string
	}{
		{"file readable by others", func(t *testing.T, dir string) {
			os.Chmod(filepath.Join(dir, FileName), 0o644)
		}, "chmod 600"},
		{"folder open to others", func(t *testing.T, dir string) {
			os.Chmod(dir, 0o755)
		}, "chmod 700"},
		{"file is a symlink", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileName)
			target := filepath.Join(t.TempDir(), "elsewhere")
			os.Rename(p, target)
			os.Symlink(target, p)
		}, "snag token rotate"},
		{"garbage", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, FileName), []byte("hunter2"), 0o600)
		}, "snag token rotate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), ".snag")
			if _, err := Load(dir); err != nil {
				t.Fatal(err)
			}
			c.setup(t, dir)
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), c.fix) {
				t.Errorf("Load: %v; want an error naming %q", err, c.fix)
			}
		})
	}
	t.Run("folder is a symlink", func(t *testing.T) {
		real := t.TempDir()
		link := filepath.Join(t.TempDir(), ".snag")
		os.Symlink(real, link)
		if _, err := Load(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("Load through a linked folder: %v", err)
		}
	})
}

func TestRotate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".snag")
	a, _ := Load(dir)
	b, err := Rotate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Equal(b.String()) {
		t.Fatal("Rotate kept the token")
	}
	c, _ := Read(dir)
	if !c.Equal(b.String()) {
		t.Fatal("Read after Rotate does not see the new token")
	}
}
