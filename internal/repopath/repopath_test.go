package repopath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cleanCase is one call of Clean: the path, and either the canonical form
// or words the error must hold (the fix it names).
type cleanCase struct {
	p, want, err string
}

func runClean(t *testing.T, o Options, cases []cleanCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.p, func(t *testing.T) {
			got, err := Clean(tt.p, o)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Clean(%q) = %q, %v; want an error containing %q", tt.p, got, err, tt.err)
				}
				if msg := err.Error(); msg[:1] != strings.ToLower(msg[:1]) {
					t.Errorf("error %q starts with a capital", msg)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Clean(%q) = %q, %v; want %q", tt.p, got, err, tt.want)
			}
			if again, err := Clean(got, o); err != nil || again != got {
				t.Errorf("Clean(%q) = %q, %v; want it unchanged", got, again, err)
			}
		})
	}
}

func TestClean(t *testing.T) {
	runClean(t, Options{}, []cleanCase{
		{p: "a", want: "a"},
		{p: "./a", want: "a"},
		{p: "a/../a", want: "a"},
		{p: "a/", want: "a"},
		{p: "a//b", want: "a/b"},
		{p: "./web/**/*.ts", want: "web/**/*.ts"},
		{p: "web/**/**/*.ts", want: "web/**/*.ts"},
		{p: "web/**", want: "web/**"},
		{p: "a/b/../../c", want: "c"},
		{p: "web/[a-z]*.ts", want: "web/[a-z]*.ts"},
		{p: "app/[[]slug]/page.tsx", want: "app/[[]slug]/page.tsx"},
		{p: "a]b", want: "a]b"},
		{p: "c:foo", want: "c:foo"},
		{p: "Web/App.ts", want: "Web/App.ts"},
		{p: "", err: `name a file, a folder or a glob relative to the repository root, like "web/app.ts"`},
		{p: "../x", err: `path "../x" leaves the repository: name it relative to the repository root, like "web/app.ts"`},
		{p: "a/../..", err: "leaves the repository: name it relative to the repository root"},
		{p: "a/../../x", err: "leaves the repository: name it relative to the repository root"},
		{p: "/etc/passwd", err: "is absolute: name it relative to the repository root"},
		{p: `C:\x`, err: "is absolute: name it relative to the repository root"},
		{p: "C:/x", err: "is absolute: name it relative to the repository root"},
		{p: `\\server\share`, err: "is absolute: name it relative to the repository root"},
		{p: "a\x00b", err: "contains a NUL byte: remove it"},
		{p: "a\xffb", err: "is not valid UTF-8: name it in UTF-8"},
		{p: `web\app.ts`, err: "contains a backslash: separate folders with /"},
		{p: ".", err: "claims the whole repository, and claiming everything is refused: name a folder or a narrower glob"},
		{p: "./", err: "claims the whole repository"},
		{p: "a/..", err: "claims the whole repository"},
		{p: "**", err: "claims the whole repository"},
		{p: "**/*", err: "claims the whole repository"},
		{p: "*/**", err: "claims the whole repository"},
		{p: "web/[ab", err: "malformed glob: a [ is never closed: close the class with ], or match a literal [ with [[]"},
		{p: "web/[]x", err: "malformed glob: a class is empty"},
		{p: "web/[z-a]", err: "malformed glob: a range runs backwards (z-a): write its lower end first"},
		{p: "web/[a/b]", err: "malformed glob: a [ is never closed"},
	})
}

func TestCleanFold(t *testing.T) {
	runClean(t, Options{Fold: true}, []cleanCase{
		{p: "Web/App.TS", want: "web/app.ts"},
		{p: "./SRC/[A-Z]*.Go", want: "src/[a-z]*.go"},
		{p: "Web/[Z-a]", err: "a range runs backwards (z-a)"},
	})
}

// TestCleanSymlinks builds a repository with real symlinks: into it, out
// of it, to its root, and to names a plain claim cannot spell.
func TestCleanSymlinks(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	mkdir(t, root, "real/sub")
	mkdir(t, root, "Upper")
	mkdir(t, root, "we*rd")
	write(t, root, "real/x.go")
	symlink(t, "real", root, "link")
	symlink(t, filepath.Join(root, "real"), root, "abs")
	symlink(t, "link", root, "chain")
	symlink(t, "real/x.go", root, "f.go")
	symlink(t, "..", root, "real/up")
	symlink(t, ".", root, "self")
	symlink(t, outside, root, "out")
	symlink(t, "../..", root, "real/escape")
	symlink(t, "Upper", root, "u")
	symlink(t, "we*rd", root, "star")
	symlink(t, "missing", root, "dangling")

	runClean(t, Options{Root: root}, []cleanCase{
		{p: "link/x.go", want: "real/x.go"},
		{p: "link", want: "real"},
		{p: "./link/", want: "real"},
		{p: "link/new/y.go", want: "real/new/y.go"},
		{p: "link/**/*.go", want: "real/**/*.go"},
		{p: "link/sub/*.go", want: "real/sub/*.go"},
		{p: "abs/x.go", want: "real/x.go"},
		{p: "chain/x.go", want: "real/x.go"},
		{p: "f.go", want: "real/x.go"},
		{p: "real/up/link/x.go", want: "real/x.go"},
		{p: "self/web", want: "web"},
		{p: "missing/x", want: "missing/x"},
		{p: "dangling/x", want: "dangling/x"},
		{p: "**/link", want: "**/link"},
		{p: "u/x", want: "Upper/x"},
		{p: "self", err: "claims the whole repository"},
		{p: "self/**", err: "claims the whole repository"},
		{p: "real/up", err: "claims the whole repository"},
		{p: "out/x", err: "outside the repository: claim a path inside the repository"},
		{p: "out", err: "outside the repository: claim a path inside the repository"},
		{p: "real/escape/x", err: "outside the repository: claim a path inside the repository"},
		{p: "star/x", err: "whose name has a glob character or a backslash: claim it by a glob"},
	})

	t.Run("fold", func(t *testing.T) {
		runClean(t, Options{Root: root, Fold: true}, []cleanCase{
			{p: "LINK/X.go", want: "real/x.go"},
			{p: "u/x", want: "upper/x"},
		})
	})

	// A root reached through a symlink resolves the same.
	t.Run("root through a symlink", func(t *testing.T) {
		via := filepath.Join(t.TempDir(), "repo")
		if err := os.Symlink(root, via); err != nil {
			t.Fatal(err)
		}
		runClean(t, Options{Root: via}, []cleanCase{
			{p: "link/x.go", want: "real/x.go"},
			{p: "out/x", err: "outside the repository"},
		})
	})

	t.Run("missing root", func(t *testing.T) {
		runClean(t, Options{Root: filepath.Join(root, "nope")}, []cleanCase{
			{p: "web/a.ts", err: "set Options.Root to the repository's top folder"},
		})
	})
}

func TestCaseInsensitive(t *testing.T) {
	dir := t.TempDir()
	digits := filepath.Join(dir, "123")
	mkdir(t, dir, "123")
	for _, d := range []string{dir, digits} {
		first, second := CaseInsensitive(d), CaseInsensitive(d)
		if first != second {
			t.Errorf("CaseInsensitive(%s) = %v, then %v", d, first, second)
		}
	}
	if entries, err := os.ReadDir(digits); err != nil || len(entries) != 0 {
		t.Errorf("the probe left %v behind in %s (%v)", entries, digits, err)
	}
	if CaseInsensitive(filepath.Join(dir, "missing")) {
		t.Error("CaseInsensitive of a missing folder = true; want false")
	}
}

func FuzzClean(f *testing.F) {
	root := f.TempDir()
	mkdir(f, root, "real/sub")
	symlink(f, "real", root, "link")
	symlink(f, ".", root, "self")
	symlink(f, f.TempDir(), root, "out")
	for _, p := range []string{"./a", "a/../a", "a/", "a//b", "./web/**/*.ts", "link/x.go", "self/a", "out/x",
		"../x", "/etc/passwd", "a\x00b", "", ".", "a/../..", "web/[ab", `a\b`, "[!]]", "**/**", "Web/[A-Z]", "..0"} {
		f.Add(p, false)
		f.Add(p, true)
	}
	f.Fuzz(func(t *testing.T, p string, fold bool) {
		for _, o := range []Options{{Fold: fold}, {Root: root, Fold: fold}} {
			got, err := Clean(p, o)
			if err != nil {
				continue
			}
			if got == "" || strings.HasPrefix(got, "/") || got == ".." || strings.HasPrefix(got, "../") {
				t.Fatalf("Clean(%q, %+v) = %q", p, o, got)
			}
			for e := range strings.SplitSeq(got, "/") {
				if e == "" || e == "." || e == ".." {
					t.Fatalf("Clean(%q, %+v) = %q, with an element %q", p, o, got, e)
				}
			}
			if again, err := Clean(got, o); err != nil || again != got {
				t.Fatalf("Clean(%q, %+v) = %q, but Clean(%q) = %q, %v", p, o, got, got, again, err)
			}
		}
	})
}

func mkdir(t testing.TB, root, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, root, rel string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(rel)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// symlink makes root/rel a symlink to target, as written.
func symlink(t testing.TB, target, root, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(rel))); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("symlinks are not available here: %v (CI must run these tests where they are)", err)
		}
		t.Skipf("symlinks are not available here: %v", err)
	}
}
