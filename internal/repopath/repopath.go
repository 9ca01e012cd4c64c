package repopath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Options are the repository a claim is cleaned for.
type Options struct {
	// Root is the repository's top folder, absolute. Symlinks inside the
	// repository are resolved against it; with Root empty, Clean works on
	// the text alone.
	Root string
	// Fold lower-cases paths, for a case-insensitive filesystem.
	// CaseInsensitive(Root) tells.
	Fold bool
}

// example is the path the errors suggest.
const example = `like "web/app.ts"`

// Clean returns the canonical form of p, a path or glob relative to the
// repository root. "./a", "a/../a", "a/" and "a//b" become "a" and "a/b"; a
// run of ** elements becomes one. The literal leading part of p, before
// its first glob element, is resolved segment by segment as far as it
// exists under Root, and a symlink on it is replaced by what it points to,
// relative to Root: with link -> real, "link/x.go" becomes "real/x.go".
// With Fold the result is lower-cased.
//
// Clean refuses, with an error that names the fix: an empty p; an absolute
// one (also "C:\x" and "\\server"); one with a NUL, a backslash (name
// folders with /) or bytes that are not UTF-8; one that leaves the
// repository ("../x", "a/../../x") or goes through a symlink that leads out
// of it; one that claims the whole repository ("." or "**"), since claiming
// everything is refused; a malformed glob (an unclosed [, an empty class,
// a range that runs backwards); and a symlink whose target's name has glob
// characters, since a plain claim cannot name it.
func Clean(p string, o Options) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf(`path "" is empty: name a file, a folder or a glob relative to the repository root, %s`, example)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q contains a NUL byte: remove it", p)
	case !utf8.ValidString(p):
		return "", fmt.Errorf("path %q is not valid UTF-8: name it in UTF-8, or match its name with a glob such as * or ?", p)
	case absolute(p):
		return "", fmt.Errorf("path %q is absolute: name it relative to the repository root, %s", p, example)
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("path %q contains a backslash: separate folders with /, %s", p, example)
	}
	q := p
	if o.Fold {
		q = strings.ToLower(q)
	}
	var elems []string
	for e := range strings.SplitSeq(q, "/") {
		switch {
		case e == "" || e == ".":
		case e == "..":
			if len(elems) == 0 {
				return "", fmt.Errorf("path %q leaves the repository: name it relative to the repository root, %s", p, example)
			}
			elems = elems[:len(elems)-1]
		case e == "**" && len(elems) > 0 && elems[len(elems)-1] == "**":
		default:
			elems = append(elems, e)
		}
	}
	for _, e := range elems {
		for i := 0; i < len(e); i++ {
			if e[i] != '[' {
				continue
			}
			_, n, problem := parseClass(e[i:])
			if problem != "" {
				return "", fmt.Errorf("path %q has a malformed glob: %s", p, problem)
			}
			i += n - 1
		}
	}
	if o.Root != "" {
		var err error
		if elems, err = resolve(p, elems, o.Root); err != nil {
			return "", err
		}
		if o.Fold {
			for i, e := range elems {
				elems[i] = strings.ToLower(e)
			}
		}
	}
	if everything(elems) {
		return "", fmt.Errorf("path %q claims the whole repository, and claiming everything is refused: name a folder or a narrower glob, like \"web\" or \"web/**/*.ts\"", p)
	}
	return strings.Join(elems, "/"), nil
}

// absolute reports whether p is absolute here or on Windows: it starts
// with / or \, or is a drive ("C:") or starts with one and a separator.
func absolute(p string) bool {
	if p[0] == '/' || p[0] == '\\' {
		return true
	}
	drive := len(p) >= 2 && p[1] == ':' && ('a' <= p[0] && p[0] <= 'z' || 'A' <= p[0] && p[0] <= 'Z')
	return drive && (len(p) == 2 || p[2] == '/' || p[2] == '\\')
}

// everything reports whether the clean elements match every path: none at
// all ("."), or ** elements with at most one element of stars alone ("**",
// "**/*", "*/**"), which needs only one element to match.
func everything(elems []string) bool {
	globstar, stars := false, 0
	for _, e := range elems {
		switch {
		case e == "**":
			globstar = true
		case strings.Trim(e, "*") == "":
			stars++
		default:
			return false
		}
	}
	return len(elems) == 0 || globstar && stars <= 1
}

// resolve replaces the longest leading run of literal elements that exists
// under root by where it leads once every symlink on it is followed,
// relative to root. Elements past it, which do not exist yet, and the glob
// elements are kept as they are.
func resolve(p string, elems []string, root string) ([]string, error) {
	lit := 0
	for lit < len(elems) && !IsGlob(elems[lit]) {
		lit++
	}
	if lit == 0 {
		return elems, nil
	}
	real, err := filepath.Abs(root)
	if err == nil {
		real, err = filepath.EvalSymlinks(real)
	}
	if err != nil {
		return nil, fmt.Errorf("path %q: read the repository root: %w: set Options.Root to the repository's top folder", p, err)
	}
	for i := lit; i > 0; i-- {
		to, err := filepath.EvalSymlinks(filepath.Join(real, filepath.FromSlash(strings.Join(elems[:i], "/"))))
		if err != nil {
			continue // it does not exist (yet), or it is a broken link: try a shorter part
		}
		rel, err := filepath.Rel(real, to)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("path %q leads through a symlink to %s, outside the repository: claim a path inside the repository", p, to)
		}
		rel = filepath.ToSlash(rel)
		if IsGlob(rel) || strings.ContainsRune(rel, '\\') {
			return nil, fmt.Errorf("path %q leads through a symlink to %q, whose name has a glob character or a backslash: claim it by a glob, naming a literal * ? or [ as [*] [?] or [[]", p, rel)
		}
		out := elems[i:]
		if rel != "." {
			out = append(strings.Split(rel, "/"), out...)
		}
		return out, nil
	}
	return elems, nil
}

// CaseInsensitive reports whether the filesystem holding the folder dir
// folds case, so that "Web" and "web" name one file. It stats dir's path
// with the case of its last element swapped and compares the two with
// os.SameFile; when that element has no letters it creates a temp file
// with a mixed-case name in dir, does the same with it, and removes it. It
// reports false when it cannot tell (dir is missing, or not writable when
// it must write).
func CaseInsensitive(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	if base := filepath.Base(dir); swapCase(base) != base {
		return sameFile(dir, filepath.Join(filepath.Dir(dir), swapCase(base)))
	}
	f, err := os.CreateTemp(dir, ".snag-CaseProbe-*")
	if err != nil {
		return false
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	return sameFile(name, filepath.Join(dir, swapCase(filepath.Base(name))))
}

// sameFile reports whether the paths a and b both exist and are one file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// swapCase returns s with upper-case letters lowered and the others raised.
func swapCase(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsUpper(r) {
			return unicode.ToLower(r)
		}
		return unicode.ToUpper(r)
	}, s)
}
