package repopath

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// IsGlob reports whether p has glob metacharacters (* ? [). A claim
// without them is a plain path, which covers everything beneath it.
func IsGlob(p string) bool {
	return strings.ContainsAny(p, "*?[")
}

// Overlap reports whether the canonical claims a and b share any path: a
// file one claims that the other claims too. It is exact for the forms the
// package comment describes: "web/*.ts" and "web/a*" overlap (web/a.ts),
// "*.go" and "*.ts" do not, "web" and "web/**/*.ts" do. Overlap(a, b) ==
// Overlap(b, a).
//
// Overlap does not fail: an unclosed [ in a claim Clean did not pass is
// taken as a literal [.
func Overlap(a, b string) bool {
	_, ok := witness(compile(a), compile(b))
	return ok
}

// Match reports whether the canonical claim c covers the concrete path p,
// such as a staged file: a glob c must match p whole, and a plain c covers p
// when p is c or lies beneath it ("web" covers "web/app.ts"). p is a path as
// git prints it, relative to the repository root with / between folders; its
// characters are taken literally, never as a glob, and it covers nothing
// beneath it. When claims were cleaned with Options.Fold, lower-case p too.
func Match(c, p string) bool {
	return compile(c).accepts(p)
}

// The decision procedure: each claim compiles to a small nondeterministic
// automaton over runes, whose moves are labelled by sets of runes (a
// literal, "any rune but /", a class) or are empty (epsilon). Two claims
// overlap when the product of their automata reaches the pair of accepting
// states; a move of the product pairs a move of each whose rune sets
// intersect. Because the sets are compared as sets, not by trying sample
// runes, the answer is exact. The patterns are short and the product is
// explored lazily, breadth first, from the start.

// span is the runes lo through hi, inclusive.
type span struct{ lo, hi rune }

// runeSet is a set of runes as sorted, disjoint, non-adjacent spans.
type runeSet []span

// anyRune is every rune a path can hold: all but the surrogate halves,
// which UTF-8 cannot encode.
var anyRune = runeSet{{0, 0xD7FF}, {0xE000, utf8.MaxRune}}

// notSlash is every rune but /: what * and ? match.
var notSlash = anyRune.without(single('/'))

func single(r rune) runeSet { return runeSet{{r, r}} }

// normalize sorts spans and merges those that overlap or touch.
func normalize(spans []span) runeSet {
	slices.SortFunc(spans, func(x, y span) int { return int(x.lo) - int(y.lo) })
	var out runeSet
	for _, s := range spans {
		if n := len(out); n > 0 && s.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// without returns the runes of s that are not in t.
func (s runeSet) without(t runeSet) runeSet {
	var out runeSet
	for _, x := range s {
		lo := x.lo
		for _, y := range t {
			if y.hi < lo || y.lo > x.hi {
				continue
			}
			if y.lo > lo {
				out = append(out, span{lo, y.lo - 1})
			}
			lo = y.hi + 1
		}
		if lo <= x.hi {
			out = append(out, span{lo, x.hi})
		}
	}
	return out
}

// has reports whether r is in s.
func (s runeSet) has(r rune) bool {
	for _, x := range s {
		if r <= x.hi {
			return r >= x.lo
		}
	}
	return false
}

// common returns a rune that is in both s and t, and whether there is one.
// Of the runes in both it prefers x, then the first one that prints plainly
// (above space), so a witness path reads well.
func common(s, t runeSet) (rune, bool) {
	var both runeSet
	for i, j := 0, 0; i < len(s) && j < len(t); {
		lo, hi := max(s[i].lo, t[j].lo), min(s[i].hi, t[j].hi)
		if lo <= hi {
			both = append(both, span{lo, hi})
		}
		if s[i].hi < t[j].hi {
			i++
		} else {
			j++
		}
	}
	if len(both) == 0 {
		return 0, false
	}
	for _, x := range both {
		if x.lo <= 'x' && 'x' <= x.hi {
			return 'x', true
		}
	}
	for _, x := range both {
		if x.hi > ' ' {
			return max(x.lo, ' '+1), true
		}
	}
	return both[0].lo, true
}

// parseClass parses the character class that opens s, which starts with [.
// It returns the runes the class matches (never /), the class's length in
// bytes, and, when the class is malformed, what is wrong and how to fix it.
// s is one path element, so it holds no /.
func parseClass(s string) (set runeSet, n int, problem string) {
	i := 1
	negate := false
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		negate = true
		i++
	}
	var spans []span
	for {
		if i >= len(s) {
			return nil, 0, "a [ is never closed: close the class with ], or match a literal [ with [[]"
		}
		lo, w := utf8.DecodeRuneInString(s[i:])
		if lo == ']' {
			if len(spans) == 0 {
				return nil, 0, "a class is empty: put at least one character between [ and ], like [ab]"
			}
			i++
			break
		}
		i += w
		hi := lo
		// A - between two characters makes a range; before ] it is literal.
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			hi, w = utf8.DecodeRuneInString(s[i+1:])
			i += 1 + w
			if hi < lo {
				return nil, 0, "a range runs backwards (" + string(lo) + "-" + string(hi) + "): write its lower end first, like [a-z]"
			}
		}
		spans = append(spans, span{lo, hi})
	}
	set = normalize(spans)
	if negate {
		return notSlash.without(set), i, ""
	}
	return set.without(runeSet{{'/', '/'}, {0xD800, 0xDFFF}}), i, ""
}

// nfa is a nondeterministic automaton over runes with a single accepting
// state. States are numbered from 0, the start.
type nfa struct {
	moves  [][]move // moves[s]: the labelled moves out of state s
	eps    [][]int  // eps[s]: the states s reaches reading nothing
	accept int
}

// move reads one rune of set and goes to state to.
type move struct {
	set runeSet
	to  int
}

// newNFA returns an automaton with no states and room for about size.
func newNFA(size int) *nfa {
	return &nfa{moves: make([][]move, 0, size), eps: make([][]int, 0, size)}
}

func (n *nfa) state() int {
	n.moves = append(n.moves, nil)
	n.eps = append(n.eps, nil)
	return len(n.moves) - 1
}

func (n *nfa) move(from int, set runeSet, to int) {
	n.moves[from] = append(n.moves[from], move{set, to})
}

func (n *nfa) epsilon(from, to int) { n.eps[from] = append(n.eps[from], to) }

// accepts reports whether n accepts the runes of p, by keeping the set of
// states n can be in after each.
func (n *nfa) accepts(p string) bool {
	in := make([]bool, len(n.moves))
	cur := n.closure([]int{0}, in)
	for _, r := range p {
		for _, s := range cur {
			in[s] = false
		}
		var next []int
		for _, s := range cur {
			for _, m := range n.moves[s] {
				if m.set.has(r) && !in[m.to] {
					in[m.to] = true
					next = append(next, m.to)
				}
			}
		}
		if len(next) == 0 {
			return false
		}
		cur = n.closure(next, in)
	}
	return in[n.accept]
}

// closure adds to states, whose members in marks, every state they reach
// by epsilon moves, and marks those too.
func (n *nfa) closure(states []int, in []bool) []int {
	for _, s := range states {
		in[s] = true
	}
	for i := 0; i < len(states); i++ {
		for _, to := range n.eps[states[i]] {
			if !in[to] {
				in[to] = true
				states = append(states, to)
			}
		}
	}
	return states
}

// compile compiles the claim c. It walks c's elements keeping two states
// at each boundary between them: empty, where no element of the path has
// been read yet, and full, where at least one has, so the next element
// must come after a /. The claim accepts in the last full state, so it
// never matches the empty path. A plain path gets a trailing ** element,
// which is the rule that it covers everything beneath it.
func compile(c string) *nfa {
	elems := strings.Split(c, "/")
	if !IsGlob(c) {
		elems = append(elems, "**")
	}
	n := newNFA(len(c) + 4*len(elems) + 2)
	empty, full := n.state(), n.state()
	for _, e := range elems {
		nextEmpty, nextFull := n.state(), n.state()
		if e == "**" {
			// Zero elements: stay as we are.
			n.epsilon(empty, nextEmpty)
			n.epsilon(full, nextFull)
			// One or more elements: the first without a / when none came
			// before, each further one after a /.
			slash, name := n.state(), n.state()
			n.move(full, single('/'), slash)
			n.move(nextFull, single('/'), slash)
			n.move(slash, notSlash, name)
			n.move(empty, notSlash, name)
			n.move(name, notSlash, name)
			n.epsilon(name, nextFull)
		} else {
			start := n.state()
			n.epsilon(empty, start)
			n.move(full, single('/'), start)
			n.epsilon(n.element(start, e), nextFull)
		}
		empty, full = nextEmpty, nextFull
	}
	n.accept = full
	return n
}

// element compiles one path element e (no /, not **) from state from and
// returns the state it ends in. An element of stars alone needs one rune
// at least: a path has no empty elements.
func (n *nfa) element(from int, e string) int {
	cur := from
	if e != "" && strings.Trim(e, "*") == "" {
		next := n.state()
		n.move(cur, notSlash, next)
		cur = next
	}
	for i := 0; i < len(e); {
		var set runeSet
		switch e[i] {
		case '*':
			// Nothing leaves cur yet but what follows in this element,
			// so * can loop on it.
			n.move(cur, notSlash, cur)
			i++
			continue
		case '?':
			set = notSlash
			i++
		case '[':
			if s, w, problem := parseClass(e[i:]); problem == "" {
				set = s
				i += w
				break
			}
			set = single('[')
			i++
		default:
			r, w := utf8.DecodeRuneInString(e[i:])
			set = single(r)
			i += w
		}
		next := n.state()
		n.move(cur, set, next)
		cur = next
	}
	return cur
}

// witness returns a path both a and b accept, and whether there is one, by
// a breadth-first search of their product from the pair of start states.
func witness(a, b *nfa) (string, bool) {
	type pair struct{ a, b int }
	type step struct {
		from pair
		r    rune // the rune read, or -1 for an epsilon move
	}
	start := pair{0, 0}
	came := map[pair]step{start: {r: -1}}
	queue := []pair{start}
	visit := func(from, to pair, r rune) {
		if _, seen := came[to]; !seen {
			came[to] = step{from, r}
			queue = append(queue, to)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p.a == a.accept && p.b == b.accept {
			var rs []rune
			for q := p; q != start; q = came[q].from {
				if r := came[q].r; r >= 0 {
					rs = append(rs, r)
				}
			}
			slices.Reverse(rs)
			return string(rs), true
		}
		for _, to := range a.eps[p.a] {
			visit(p, pair{to, p.b}, -1)
		}
		for _, to := range b.eps[p.b] {
			visit(p, pair{p.a, to}, -1)
		}
		for _, ma := range a.moves[p.a] {
			for _, mb := range b.moves[p.b] {
				if r, ok := common(ma.set, mb.set); ok {
					visit(p, pair{ma.to, mb.to}, r)
				}
			}
		}
	}
	return "", false
}
