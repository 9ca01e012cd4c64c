package codec

import (
	"bytes"
	"errors"
)

// ErrMerge is returned by [Merge] when both sides changed the same lines
// in different ways, and neither may simply win.
var ErrMerge = errors.New("both sides changed the same lines")

// ownedKeys are the frontmatter keys snag itself sets when it moves a task
// (status, assignee and the rest): the scalars a person's edit wins over.
var ownedKeys = []string{"status", "assignee", "updated", "verified", "trust"}

// maxEdits bounds the work of matching two files line by line: files
// that differ in more lines than this are refused (ErrMerge) rather than
// matched slowly.
const maxEdits = 1000

// Merge makes one file of two edits of base, line by line: ours (what snag
// made of it, or what the file at the path holds now) and theirs (a
// person's save). Lines only one side changed take that side, except that
// lines of the body that the person's side lacks are kept (after theirs):
// a save made from a stale read never takes lines out. Where both
// inserted lines at the same place, theirs come first, then ours (or the
// longer alone, when it starts or ends with the other's, as a save made
// from a file that already held the other side's lines does): no line
// either side added is dropped, nor doubled. Where both changed the same
// lines of snag's own scalars (status, assignee, updated, verified,
// trust), the person's lines win. Any other overlap fails with ErrMerge,
// and the caller must keep both files.
func Merge(base, ours, theirs []byte) ([]byte, error) {
	b, o, t := splitLines(base), splitLines(ours), splitLines(theirs)
	mo, ok := matchLines(b, o)
	if !ok {
		return nil, ErrMerge
	}
	mt, ok := matchLines(b, t)
	if !ok {
		return nil, ErrMerge
	}
	body := bodyStart(b)
	var out bytes.Buffer
	i, j, k := 0, 0, 0
	for {
		s := i
		for s < len(b) && (mo[s] < 0 || mt[s] < 0) {
			s++
		}
		oj, tk := len(o), len(t)
		if s < len(b) {
			oj, tk = mo[s], mt[s]
		}
		bc, oc, tc := b[i:s], o[j:oj], t[k:tk]
		oursChanged, theirsChanged := !sameLines(bc, oc), !sameLines(bc, tc)
		switch {
		case !oursChanged && i >= body:
			// theirs may be a whole-file save made from a stale read: its
			// lines go in, and base's lines it lacks are kept after them.
			writeLines(&out, tc)
			writeLines(&out, missingFrom(bc, tc))
		case !oursChanged:
			writeLines(&out, tc)
		case !theirsChanged, sameLines(oc, tc):
			writeLines(&out, oc)
		case len(bc) == 0 && holdsAtAnEnd(oc, tc):
			writeLines(&out, oc)
		case len(bc) == 0 && holdsAtAnEnd(tc, oc):
			writeLines(&out, tc)
		case len(bc) == 0:
			writeLines(&out, tc)
			writeLines(&out, oc)
		case ownedLines(bc) && ownedLines(oc):
			writeLines(&out, tc)
		case len(bc) == len(oc) && len(bc) == len(tc):
			// Changes on neighbouring lines: merge them line by line.
			for x := range bc {
				switch {
				case bytes.Equal(bc[x], oc[x]):
					out.Write(tc[x])
				case bytes.Equal(bc[x], tc[x]), bytes.Equal(oc[x], tc[x]):
					out.Write(oc[x])
				case ownedLines(bc[x : x+1]):
					out.Write(tc[x])
				default:
					return nil, ErrMerge
				}
			}
		default:
			return nil, ErrMerge
		}
		if s == len(b) {
			return out.Bytes(), nil
		}
		out.Write(b[s])
		i, j, k = s+1, oj+1, tk+1
	}
}

// bodyStart is the index of the first line after the frontmatter of a
// file cut into lines, or 0 when it has none.
func bodyStart(lines [][]byte) int {
	if len(lines) == 0 || !bytes.Equal(bytes.TrimRight(lines[0], "\r\n"), []byte("---")) {
		return 0
	}
	for x := 1; x < len(lines); x++ {
		if bytes.Equal(bytes.TrimRight(lines[x], "\r\n"), []byte("---")) {
			return x + 1
		}
	}
	return 0
}

// Lacks reports whether cur lacks a line that theirs added to base (by
// count: a line theirs holds more often than base must be that often in
// cur too), leaving out the frontmatter lines of snag's own scalars: a
// later move of the task changes those, and rightly.
func Lacks(cur, base, theirs []byte) bool { return len(lacking(cur, base, theirs)) > 0 }

// lacking is what Lacks finds: each line cur lacks, with how many times.
func lacking(cur, base, theirs []byte) map[string]int {
	count := func(data []byte) map[string]int {
		n := map[string]int{}
		lines := splitLines(data)
		body := bodyStart(lines)
		for x, l := range lines {
			if x >= body || !ownedLines(lines[x:x+1]) {
				n[string(l)]++
			}
		}
		return n
	}
	b, c := count(base), count(cur)
	var miss map[string]int
	for l, n := range count(theirs) {
		if n > b[l] && c[l] < n {
			if miss == nil {
				miss = map[string]int{}
			}
			miss[l] = min(n-b[l], n-c[l])
		}
	}
	return miss
}

// Readd puts back into cur the lines theirs added to base that cur lacks
// (see [Lacks]), where theirs has them, and changes nothing else of cur:
// it is a three-way merge of cur and theirs on theirs without those
// lines. A save made from a read that missed a merge is mended this way
// without bringing back what theirs held of snag's own scalars, which
// later moves changed. It fails with ErrMerge where cur changed the lines
// around a place a line goes back.
func Readd(cur, base, theirs []byte) ([]byte, error) {
	miss := lacking(cur, base, theirs)
	if len(miss) == 0 {
		return cur, nil
	}
	lines := splitLines(theirs)
	var without bytes.Buffer
	for x := len(lines) - 1; x >= 0; x-- { // the last of a repeated line goes first
		if miss[string(lines[x])] > 0 {
			miss[string(lines[x])]--
			lines[x] = nil
		}
	}
	writeLines(&without, lines)
	return Merge(without.Bytes(), cur, theirs)
}

// holdsAtAnEnd reports whether a starts or ends with the lines of b.
func holdsAtAnEnd(a, b [][]byte) bool {
	return len(b) <= len(a) && (sameLines(a[:len(b)], b) || sameLines(a[len(a)-len(b):], b))
}

// missingFrom returns the lines of a that b does not have.
func missingFrom(a, b [][]byte) [][]byte {
	have := map[string]int{}
	for _, l := range b {
		have[string(l)]++
	}
	var out [][]byte
	for _, l := range a {
		if have[string(l)] > 0 {
			have[string(l)]--
			continue
		}
		out = append(out, l)
	}
	return out
}

// splitLines cuts data after each newline; the last line may have none.
func splitLines(data []byte) [][]byte {
	var lines [][]byte
	for len(data) > 0 {
		n := bytes.IndexByte(data, '\n') + 1
		if n == 0 {
			n = len(data)
		}
		lines = append(lines, data[:n])
		data = data[n:]
	}
	return lines
}

func sameLines(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func writeLines(w *bytes.Buffer, lines [][]byte) {
	for _, l := range lines {
		w.Write(l)
	}
}

// ownedLines reports whether every line sets one of snag's own scalars.
func ownedLines(lines [][]byte) bool {
	for _, l := range lines {
		owned := false
		for _, k := range ownedKeys {
			if bytes.HasPrefix(l, []byte(k+":")) {
				owned = true
				break
			}
		}
		if !owned {
			return false
		}
	}
	return true
}

// matchLines matches the lines of a with those of b along a longest
// common subsequence: m[i] is the line of b that a's line i matches, or
// -1. It reports false when the changed middle is too large to match.
func matchLines(a, b [][]byte) (m []int, ok bool) {
	m = make([]int, len(a))
	for i := range m {
		m[i] = -1
	}
	pre := 0
	for pre < len(a) && pre < len(b) && bytes.Equal(a[pre], b[pre]) {
		m[pre] = pre
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && bytes.Equal(a[len(a)-1-suf], b[len(b)-1-suf]) {
		m[len(a)-1-suf] = len(b) - 1 - suf
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if len(ma) == 0 || len(mb) == 0 {
		return m, true
	}
	match, ok := align(ma, mb)
	if !ok {
		return nil, false
	}
	for x, y := range match {
		if y >= 0 {
			m[pre+x] = pre + y
		}
	}
	return m, true
}

// myers matches the lines of a with those of b along a shortest edit
// script (Myers' O(ND) algorithm): m[x] is the line of b that a's line x
// matches, or -1. It reports false when more than maxEdits lines differ.
func myers(a, b [][]byte) (m []int, ok bool) {
	n, nb := len(a), len(b)
	limit := min(n+nb, maxEdits)
	off := limit + 1
	v := make([]int32, 2*limit+3)
	// trace[d] holds v[off-d-1 : off+d+2] as it was before step d.
	var trace [][]int32
	for d := 0; d <= limit; d++ {
		trace = append(trace, append([]int32(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = int(v[off+k+1])
			} else {
				x = int(v[off+k-1]) + 1
			}
			y := x - k
			for x < n && y < nb && bytes.Equal(a[x], b[y]) {
				x, y = x+1, y+1
			}
			v[off+k] = int32(x)
			if x >= n && y >= nb {
				return backtrack(trace, n, nb), true
			}
		}
	}
	return nil, false
}

// backtrack walks a Myers trace back from the end and returns the matching.
func backtrack(trace [][]int32, n, nb int) []int {
	m := make([]int, n)
	for i := range m {
		m[i] = -1
	}
	x, y := n, nb
	for d := len(trace) - 1; d > 0; d-- {
		tv := trace[d] // v before step d; index k is at k+d+1
		at := func(k int) int { return int(tv[k+d+1]) }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			x, y = x-1, y-1
			m[x] = y
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		m[x] = y
	}
	return m
}

// align matches a's lines with b's: by a shortest edit script when they
// differ in few lines, else on the lines found exactly once in each (in
// the longest run that keeps their order), with the gaps between those
// matched by edit scripts in turn, or left unmatched when still too
// different. An unmatched line is merged as changed, never dropped.
func align(a, b [][]byte) ([]int, bool) {
	if m, ok := myers(a, b); ok {
		return m, true
	}
	type seen struct{ na, nb, ia, ib int }
	count := map[string]*seen{}
	for i, l := range a {
		c := count[string(l)]
		if c == nil {
			c = &seen{}
			count[string(l)] = c
		}
		c.na, c.ia = c.na+1, i
	}
	for j, l := range b {
		if c := count[string(l)]; c != nil {
			c.nb, c.ib = c.nb+1, j
		}
	}
	var pairs [][2]int // (line of a, line of b), in a's order
	for i, l := range a {
		if c := count[string(l)]; c.na == 1 && c.nb == 1 {
			pairs = append(pairs, [2]int{i, c.ib})
		}
	}
	anchors := increasing(pairs)
	if len(anchors) == 0 {
		return nil, false
	}
	m := make([]int, len(a))
	for i := range m {
		m[i] = -1
	}
	pa, pb := 0, 0
	for _, an := range append(anchors, [2]int{len(a), len(b)}) {
		if gm, ok := myers(a[pa:an[0]], b[pb:an[1]]); ok {
			for x, y := range gm {
				if y >= 0 {
					m[pa+x] = pb + y
				}
			}
		}
		if an[0] < len(a) {
			m[an[0]] = an[1]
		}
		pa, pb = an[0]+1, an[1]+1
	}
	return m, true
}

// increasing returns the longest run of pairs whose second values
// increase, in order.
func increasing(pairs [][2]int) [][2]int {
	var tails []int // tails[l]: index of the pair ending the best run of length l+1
	prev := make([]int, len(pairs))
	for i, p := range pairs {
		lo, hi := 0, len(tails)
		for lo < hi {
			mid := (lo + hi) / 2
			if pairs[tails[mid]][1] < p[1] {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		prev[i] = -1
		if lo > 0 {
			prev[i] = tails[lo-1]
		}
		if lo == len(tails) {
			tails = append(tails, i)
		} else {
			tails[lo] = i
		}
	}
	if len(tails) == 0 {
		return nil
	}
	out := make([][2]int, len(tails))
	for i, k := len(tails)-1, tails[len(tails)-1]; i >= 0; i, k = i-1, prev[k] {
		out[i] = pairs[k]
	}
	return out
}
