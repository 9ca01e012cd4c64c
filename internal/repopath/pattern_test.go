package repopath

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"
)

// overlaps are pairs of canonical claims and whether they share a path.
// Each is checked both ways round.
var overlaps = []struct {
	a, b string
	want bool
}{
	// Plain paths cover everything beneath them.
	{"a", "a", true},
	{"a", "ab", false},
	{"a", "a/b", true},
	{"a/b", "a/c", false},
	{"web", "web/a.ts", true},
	{"web", "webapp", false},
	{"web/a.ts", "web/a.ts/x", true},
	{"web", "web/**/*.ts", true},
	{"a", "**/b", true},
	{"a", "*/*", true},
	{"docs", "docs/*.md", true},
	{"a", "b/**", false},
	// * and ? stay within one element.
	{"web/*.ts", "web/a*", true},
	{"*.go", "*.ts", false},
	{"*.go", "a/b.go", false},
	{"*", "a/b", false},
	{"*", "a", true},
	{"?", "ab", false},
	{"??", "ab", true},
	{"?", "*", true},
	{"a*b", "ab", true},
	{"a*b", "a/b", false},
	{"ab*", "*ba", true},
	{"a?", "*b?", false},
	{"a/*/c", "a/b/*", true},
	{"a/*/b", "a/b", true}, // a/b/b: a plain path covers what is beneath it
	{"a/*/b", "*/b", false},
	{"*/*", "*", false},
	// ** matches zero or more whole elements.
	{"**/*.go", "web/x.go", true},
	{"**/*.go", "a/b/c.go", true},
	{"**/x", "x", true},
	{"a/**/b", "a/b", true},
	{"a/**/b", "a/x/y/b", true},
	{"a/**", "a", true},
	{"a/**", "a/b/c", true},
	{"a/**", "b", false},
	{"a/**", "ab", false},
	{"web/**/*.ts", "web/a.go", true}, // web/a.go/x.ts
	{"web/**/*.ts", "web/*.go", false},
	{"web/**/*.ts", "web/x/y.ts", true},
	{"web/*/index.ts", "web/**/index.ts", true},
	{"a/**/b/**/c", "a/b/c", true},
	{"a/**/b", "a/**/c", false},
	{"a/**/b", "**/c/**", true},
	{"a**b", "a/b", false},
	{"a**b", "axb", true},
	// Classes match one character, never /.
	{"src/[a-m]*", "src/[n-z]*", false},
	{"src/[a-m]*", "src/m.go", true},
	{"src/[a-m]*", "src/n.go", false},
	{"[!a]*", "a", false},
	{"[^a]b", "xb", true},
	{"[!a]b", "[^b]b", true},
	{"[a-c][a-c]", "cc", true},
	{"[a-c]", "d", false},
	{"*.[jt]s", "*.ts", true},
	{"*.[jt]s", "*.go", false},
	{"a[!b]c", "a/c", false},
	{"a[#-0]b", "a/b", false}, // the range holds /, but a class never matches it
	{"a[#-0]b", "a.b", true},
	{"[ab]", "[!ab]", false},
	{"[!ab]", "[!ac]", true},
	{"[a-]", "-", true},
	{"app/[[]slug]/*.tsx", "app/[[]slug]/page.tsx", true},
	{"app/[[]slug]", "app/[slug]", false},
	{"app/[[]slug]/*.tsx", "app/s/page.tsx", false},
	// Runes beyond ASCII.
	{"é*", "[é]x", true},
	{"[à-ü]", "é", true},
	{"[à-ü]", "e", false},
	{"日本/*", "日本/語", true},
}

func TestOverlap(t *testing.T) {
	for _, tt := range overlaps {
		t.Run(tt.a+" vs "+tt.b, func(t *testing.T) {
			if got := Overlap(tt.a, tt.b); got != tt.want {
				t.Errorf("Overlap(%q, %q) = %v; want %v", tt.a, tt.b, got, tt.want)
			}
			if got := Overlap(tt.b, tt.a); got != tt.want {
				t.Errorf("Overlap(%q, %q) = %v; want %v", tt.b, tt.a, got, tt.want)
			}
			if w, ok := witness(compile(tt.a), compile(tt.b)); ok && !(Match(tt.a, w) && Match(tt.b, w)) {
				t.Errorf("witness %q is not matched by both %q and %q", w, tt.a, tt.b)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	for _, tt := range []struct {
		c, p string
		want bool
	}{
		{"web", "web", true},
		{"web", "web/a.ts", true},
		{"web", "web/x/y/a.ts", true},
		{"web", "webx", false},
		{"web/a.ts", "web/a.ts", true},
		{"web/a.ts", "web", false},
		{"web/*.ts", "web/a.ts", true},
		{"web/*.ts", "web/x/a.ts", false},
		{"web/**/*.ts", "web/a.ts", true},
		{"web/**/*.ts", "web/x/y/a.ts", true},
		{"web/**/*.ts", "web/x/y/a.go", false},
		{"a/**", "a", true},
		{"a/**", "a/b/c", true},
		{"*", "a/b", false},
		{"*", "a", true},
		// p is taken literally.
		{"a", "a/*", true},
		{"a*", "a*", true},
		{"[*]", "x", false},
		{"[*]", "*", true},
		{"a/*", "a/*/b", false},
		{"app/[[]slug]/*.tsx", "app/[slug]/page.tsx", true},
		{"app/[slug]/*.tsx", "app/[slug]/page.tsx", false},
		{"app/[slug]/*.tsx", "app/s/page.tsx", true},
	} {
		t.Run(tt.c+" covers "+tt.p, func(t *testing.T) {
			if got := Match(tt.c, tt.p); got != tt.want {
				t.Errorf("Match(%q, %q) = %v; want %v", tt.c, tt.p, got, tt.want)
			}
		})
	}
}

func TestIsGlob(t *testing.T) {
	for p, want := range map[string]bool{
		"web/app.ts": false, "web": false, "a]b": false,
		"*.go": true, "a?": true, "[ab]": true, "web/**": true,
	} {
		if got := IsGlob(p); got != want {
			t.Errorf("IsGlob(%q) = %v; want %v", p, got, want)
		}
	}
}

// reference reports whether claim c covers path p, by the rules written
// out as directly as they can be: a plain claim is p or a folder above it;
// a glob matches p element by element, ** taking any number of them and
// path.Match judging each other one.
func reference(c, p string) bool {
	if !IsGlob(c) {
		return p == c || strings.HasPrefix(p, c+"/")
	}
	return referenceElems(strings.Split(c, "/"), strings.Split(p, "/"))
}

func referenceElems(pat, elems []string) bool {
	if len(pat) == 0 {
		return len(elems) == 0
	}
	if pat[0] == "**" {
		for k := 0; k <= len(elems); k++ {
			if referenceElems(pat[1:], elems[k:]) {
				return true
			}
		}
		return false
	}
	if len(elems) == 0 {
		return false
	}
	ok, err := path.Match(pat[0], elems[0])
	return err == nil && ok && referenceElems(pat[1:], elems[1:])
}

// paths returns every path of up to max runes over a and b: no empty
// elements, no / at either end.
func paths(max int) []string {
	var out []string
	var grow func(p string)
	grow = func(p string) {
		if p != "" && !strings.HasSuffix(p, "/") {
			out = append(out, p)
		}
		if len(p) == max {
			return
		}
		for _, r := range "ab/" {
			if r == '/' && (p == "" || strings.HasSuffix(p, "/")) {
				continue
			}
			grow(p + string(r))
		}
	}
	grow("")
	return out
}

// randomClaim returns a claim of one to three elements, each ** or one to
// three tokens of a, b, *, ? and classes (in the syntax path.Match shares).
func randomClaim(r *rand.Rand) string {
	tokens := []string{"a", "b", "a", "b", "*", "?", "[ab]", "[^a]", "[b-c]"}
	elems := make([]string, 1+r.IntN(3))
	for i := range elems {
		if r.IntN(4) == 0 {
			elems[i] = "**"
			continue
		}
		for range 1 + r.IntN(3) {
			elems[i] += tokens[r.IntN(len(tokens))]
		}
	}
	return strings.Join(elems, "/")
}

// TestOverlapAgainstEnumeration checks Overlap and Match against the
// reference on random claims. Both directions are sound: a path of up to
// six runes that both claims cover means they must overlap; and when
// Overlap says they do, the path it found (of any length) must be covered
// by both by the reference. Match must agree with the reference on every
// enumerated path.
func TestOverlapAgainstEnumeration(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	all := paths(6)
	claims := make([]string, 200)
	for i := range claims {
		claims[i] = randomClaim(r)
	}
	covered := make([][]bool, len(claims))
	for i, c := range claims {
		covered[i] = make([]bool, len(all))
		for j, p := range all {
			covered[i][j] = reference(c, p)
			if got := Match(c, p); got != covered[i][j] {
				t.Fatalf("Match(%q, %q) = %v; the reference says %v", c, p, got, covered[i][j])
			}
		}
	}
	for i := range claims {
		for j := i; j < len(claims); j++ {
			a, b := claims[i], claims[j]
			shared := ""
			for k, p := range all {
				if covered[i][k] && covered[j][k] {
					shared = p
					break
				}
			}
			got := Overlap(a, b)
			if got != Overlap(b, a) {
				t.Fatalf("Overlap(%q, %q) = %v but Overlap(%q, %q) = %v", a, b, got, b, a, !got)
			}
			if shared != "" && !got {
				t.Fatalf("Overlap(%q, %q) = false; both cover %q", a, b, shared)
			}
			if !got {
				continue
			}
			w, ok := witness(compile(a), compile(b))
			if !ok || !reference(a, w) || !reference(b, w) {
				t.Fatalf("Overlap(%q, %q) = true, but its witness %q (%v) is not covered by both", a, b, w, ok)
			}
			if w == "" || strings.HasPrefix(w, "/") || strings.HasSuffix(w, "/") || strings.Contains(w, "//") {
				t.Fatalf("Overlap(%q, %q): witness %q is not a path", a, b, w)
			}
		}
	}
}

func TestParseClass(t *testing.T) {
	for _, tt := range []struct {
		class   string
		in, out string // runes the class matches and does not
		n       int
		problem string
	}{
		{class: "[abc]", in: "abc", out: "d/", n: 5},
		{class: "[a-c]x", in: "abc", out: "d", n: 5},
		{class: "[!a-c]", in: "d日", out: "abc/", n: 6},
		{class: "[^a]", in: "b", out: "a/", n: 4},
		{class: "[a-]", in: "a-", out: "b", n: 4},
		{class: "[-a]", in: "a-", out: "b", n: 4},
		{class: "[[]", in: "[", out: "]", n: 3},
		{class: "[#-0]", in: "#.0", out: "/", n: 5},
		{class: "[à-ü]", in: "àéü", out: "aÿ", n: len("[à-ü]")},
		{class: "[ab", problem: "never closed"},
		{class: "[", problem: "never closed"},
		{class: "[!", problem: "never closed"},
		{class: "[]", problem: "empty"},
		{class: "[!]", problem: "empty"},
		{class: "[z-a]", problem: "backwards"},
	} {
		t.Run(tt.class, func(t *testing.T) {
			set, n, problem := parseClass(tt.class)
			if tt.problem != "" {
				if !strings.Contains(problem, tt.problem) {
					t.Fatalf("parseClass(%q) problem = %q; want one about %q", tt.class, problem, tt.problem)
				}
				return
			}
			if problem != "" || n != tt.n {
				t.Fatalf("parseClass(%q) = _, %d, %q; want _, %d, \"\"", tt.class, n, problem, tt.n)
			}
			for _, r := range tt.in {
				if _, ok := common(set, single(r)); !ok {
					t.Errorf("%s does not match %q", tt.class, r)
				}
			}
			for _, r := range tt.out {
				if _, ok := common(set, single(r)); ok {
					t.Errorf("%s matches %q", tt.class, r)
				}
			}
		})
	}
}

func FuzzOverlap(f *testing.F) {
	for _, tt := range overlaps {
		f.Add(tt.a, tt.b)
	}
	f.Add("[", "[]")
	f.Add("", "a//b")
	f.Add("/**/", "**")
	f.Fuzz(func(t *testing.T, a, b string) {
		got := Overlap(a, b)
		if Overlap(b, a) != got {
			t.Fatalf("Overlap(%q, %q) = %v but Overlap(%q, %q) = %v", a, b, got, b, a, !got)
		}
		w, ok := witness(compile(a), compile(b))
		if ok != got {
			t.Fatalf("witness and Overlap disagree on %q, %q", a, b)
		}
		if ok && !(Match(a, w) && Match(b, w)) {
			t.Fatalf("witness %q of %q and %q is not matched by both", w, a, b)
		}
	})
}
