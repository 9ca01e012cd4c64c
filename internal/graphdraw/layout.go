package graphdraw

import (
	"cmp"
	"math"
	"slices"
)

// The picture's measures, in pixels.
const (
	nodeW  = 220.0 // a note's box
	nodeH  = 72.0  // its key and type, two lines of title, its branch
	gapW   = 100.0 // between columns: room for a link's curve and its label
	gapH   = 32.0  // between rows: room for the long links' lanes
	margin = 24.0
	pad    = 10.0 // inside a note's box

	titleSize = 16.0
	textSize  = 12.0 // a note's key and title
	smallSize = 10.5 // a note's type and branch, the legend
	labelSize = 10.0 // a link's kind

	titleRunes    = 28 // a note's title on one line (dot, mermaid) is cut to about this many characters
	boxTitleRunes = 56 // and on its box's two lines, to about this many
)

// point is a place in the picture.
type point struct{ x, y float64 }

// box is a rectangle: its top left corner and size.
type box struct{ x, y, w, h float64 }

// overlaps reports whether a and b share any area.
func (a box) overlaps(b box) bool {
	return a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h
}

// scene is a prepared graph laid out: every note's column and row, every
// link's path and label, the legend, and the picture's size.
type scene struct {
	p      *prepared
	layers [][]*note // the columns, each top to bottom
	rows   int       // rows of the grid the columns share

	title         string // the visible title, cut to fit
	summary       string // the description, also shown under the title
	legend        []legendItem
	top           float64 // y of the grid's first row
	width, height float64
	routes        []route // one per link, in the graph's order
}

// legendItem is one swatch of the legend and its words.
type legendItem struct {
	at       point // the swatch's top left corner
	style    style
	unvetted bool
	text     string
}

// route is how one link is drawn.
type route struct {
	path   string // SVG path data, from the link's source to its target
	label  point  // the centre of the kind's label
	text   string // the kind, cut to fit between columns
	dashed bool   // a rejected option
}

// arrange lays out p.
func arrange(p *prepared) *scene {
	s := &scene{p: p, summary: p.summary()}
	s.title = fit(p.title, 80, 1200, titleSize)
	s.layer()
	s.assignRows()

	graphW := 2*margin + float64(len(s.layers))*nodeW + float64(max(len(s.layers)-1, 0))*gapW
	legendRows := s.arrangeLegend(max(graphW-2*margin, 360))
	headerH := margin + titleSize + 8 + smallSize + 12 + float64(legendRows)*20
	s.top = headerH + gapH/2
	for _, item := range s.legend {
		graphW = max(graphW, item.at.x+18+textWidth(item.text, smallSize)+margin)
	}
	s.width = math.Ceil(max(graphW, 2*margin+textWidth(s.title, titleSize)*1.1, 2*margin+textWidth(s.summary, smallSize)))
	s.height = math.Ceil(s.top + float64(s.rows)*(nodeH+gapH) + margin/2)
	s.route()
	return s
}

// layer cuts the notes, in time order, into columns: a column ends when
// the next note links to a note already in it, or when it is full.
func (s *scene) layer() {
	notes := s.p.notes
	capacity := max(4, int(math.Ceil(math.Sqrt(float64(len(notes))))))
	for _, n := range notes {
		cur := len(s.layers) - 1
		if cur < 0 || len(s.layers[cur]) == capacity || s.linksInto(n, cur) {
			s.layers = append(s.layers, nil)
			cur++
		}
		n.layer = cur
		s.layers[cur] = append(s.layers[cur], n)
	}
}

// linksInto reports whether n links to a note already in column l.
func (s *scene) linksInto(n *note, l int) bool {
	for _, u := range n.nbrs {
		if u >= n.order {
			break
		}
		if s.p.notes[u].layer == l {
			return true
		}
	}
	return false
}

// assignRows places the notes of each column on the shared grid of rows,
// each near the average row of the notes it links to: once left to
// right, by the columns already placed, then once right to left, by all.
func (s *scene) assignRows() {
	for _, l := range s.layers {
		s.rows = max(s.rows, len(l))
	}
	notes := s.p.notes
	want := func(n *note, use func(u *note) bool, fallback float64) float64 {
		sum, k := 0.0, 0
		for _, u := range n.nbrs {
			if un := notes[u]; use(un) {
				sum += float64(un.row)
				k++
			}
		}
		if k == 0 {
			return fallback
		}
		return sum / float64(k)
	}
	for l, layer := range s.layers {
		w := make([]float64, len(layer))
		for i, n := range layer {
			w[i] = want(n, func(u *note) bool { return u.layer < l }, float64(s.rows-len(layer))/2+float64(i))
		}
		s.place(layer, w)
	}
	for l := len(s.layers) - 1; l >= 0; l-- {
		layer := s.layers[l]
		w := make([]float64, len(layer))
		for i, n := range layer {
			w[i] = want(n, func(u *note) bool { return u.layer != l }, float64(n.row))
		}
		s.place(layer, w)
	}
	// Close up rows no column uses at the top or bottom.
	lo, hi := s.rows, -1
	for _, layer := range s.layers {
		lo = min(lo, layer[0].row)
		hi = max(hi, layer[len(layer)-1].row)
	}
	for _, n := range notes {
		n.row -= lo
	}
	s.rows = max(hi-lo+1, 0)
}

// place gives the notes of one column distinct rows of the grid, in the
// order of the rows they want, each as near its wish as the others
// allow, and sorts the column top to bottom.
func (s *scene) place(layer []*note, want []float64) {
	idx := make([]int, len(layer))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(want[a], want[b]); c != 0 {
			return c
		}
		return cmp.Compare(layer[a].order, layer[b].order)
	})
	rows := make([]int, len(idx))
	for i, j := range idx {
		r := min(max(int(math.Round(want[j])), 0), s.rows-1)
		if i > 0 {
			r = max(r, rows[i-1]+1)
		}
		rows[i] = r
	}
	for i := len(rows) - 1; i >= 0; i-- {
		upper := s.rows - 1
		if i < len(rows)-1 {
			upper = rows[i+1] - 1
		}
		rows[i] = min(rows[i], upper)
	}
	sorted := make([]*note, len(idx))
	for i, j := range idx {
		sorted[i] = layer[j]
		sorted[i].row = rows[i]
	}
	copy(layer, sorted)
}

// at is the top left corner of n's box.
func (s *scene) at(n *note) point {
	return point{margin + float64(n.layer)*(nodeW+gapW), s.top + float64(n.row)*(nodeH+gapH)}
}

// box is n's box.
func (s *scene) box(n *note) box {
	p := s.at(n)
	return box{p.x, p.y, nodeW, nodeH}
}

// laneY is the y of the lane between grid rows k-1 and k: lane 0 runs
// above the first row, lane s.rows below the last.
func (s *scene) laneY(k int) float64 {
	return s.top + float64(k)*(nodeH+gapH) - gapH/2
}

// arrangeLegend lays out a swatch for each type drawn, and one for
// unvetted notes if any is, in rows no wider than width; it returns how
// many rows it used.
func (s *scene) arrangeLegend(width float64) int {
	var used [8]bool
	unvetted := false
	for _, n := range s.p.notes {
		used[n.styleIdx] = true
		unvetted = unvetted || n.unvetted
	}
	var items []legendItem
	for i, st := range append(slices.Clone(palette), other) {
		if used[i] {
			items = append(items, legendItem{style: st, text: st.name})
		}
	}
	if unvetted {
		items = append(items, legendItem{style: style{"unvetted", background, edgeColour}, unvetted: true, text: "unvetted"})
	}
	if len(items) == 0 {
		return 0
	}
	y := margin + titleSize + 8 + smallSize + 10
	x, rows := margin, 1
	for i := range items {
		w := 18 + textWidth(items[i].text, smallSize) + 16
		if x > margin && x+w-16 > margin+width {
			x, y, rows = margin, y+20, rows+1
		}
		items[i].at = point{x, y}
		x += w
	}
	s.legend = items
	return rows
}

// route draws every link: between neighbouring columns a curve through
// the gap; across more, a lane between two rows of the grid, reached by
// a curve at either end. Each link leaves and enters a note at its own
// port on the note's side, the ports in the order of where the links go,
// so they do not cross at the note. Each link's kind is labelled at its
// middle, or moved along it to the nearest place clear of every note and
// earlier label.
func (s *scene) route() {
	notes := s.p.notes
	type end struct {
		link  int
		key   float64 // where the link goes: the y it heads for
		other int     // the note at its other end
	}
	type plan struct {
		left, right *note
		lane        int // -1 between neighbouring columns
		laneY       float64
		reverse     bool // the link points left
	}
	plans := make([]plan, len(s.p.links))
	leftEnds := make([][]end, len(notes))  // ends on a note's left side
	rightEnds := make([][]end, len(notes)) // and right side
	for i, l := range s.p.links {
		a, b := notes[l.from], notes[l.to]
		pl := plan{left: a, right: b, lane: -1}
		if b.layer < a.layer {
			pl.left, pl.right, pl.reverse = b, a, true
		}
		ly, ry := s.at(pl.left).y+nodeH/2, s.at(pl.right).y+nodeH/2
		lkey, rkey := ry, ly
		if pl.right.layer-pl.left.layer > 1 {
			mid := (ly + ry) / 2
			k := int(math.Round((mid - s.top + gapH/2) / (nodeH + gapH)))
			pl.lane = min(max(k, 0), s.rows)
			pl.laneY = s.laneY(pl.lane)
			lkey, rkey = pl.laneY, pl.laneY
		}
		plans[i] = pl
		rightEnds[pl.left.order] = append(rightEnds[pl.left.order], end{i, lkey, pl.right.order})
		leftEnds[pl.right.order] = append(leftEnds[pl.right.order], end{i, rkey, pl.left.order})
	}
	// ports[i] are link i's ends on its left and right notes.
	ports := make([][2]float64, len(s.p.links))
	spread := func(n *note, ends []end, side int) {
		slices.SortFunc(ends, func(a, b end) int {
			return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.other, b.other), cmp.Compare(a.link, b.link))
		})
		y := s.at(n).y
		for i, e := range ends {
			ports[e.link][side] = y + nodeH*float64(i+1)/float64(len(ends)+1)
		}
	}
	for _, n := range notes {
		spread(n, rightEnds[n.order], 0)
		spread(n, leftEnds[n.order], 1)
	}

	// Links sharing a lane over the same stretch take separate tracks.
	offsets := [...]float64{0, -5, 5, -10, 10}
	track := make([]float64, len(s.p.links))
	byLane := make(map[int][]int)
	for i, pl := range plans {
		if pl.lane >= 0 {
			byLane[pl.lane] = append(byLane[pl.lane], i)
		}
	}
	for _, links := range byLane {
		slices.SortFunc(links, func(a, b int) int {
			return cmp.Or(cmp.Compare(plans[a].left.layer, plans[b].left.layer), cmp.Compare(plans[a].right.layer, plans[b].right.layer), cmp.Compare(a, b))
		})
		var ends []int // the last column each track runs to
		for _, i := range links {
			t := slices.IndexFunc(ends, func(last int) bool { return last <= plans[i].left.layer })
			if t < 0 {
				t = len(ends)
				ends = append(ends, 0)
			}
			ends[t] = plans[i].right.layer
			track[i] = offsets[t%len(offsets)]
		}
	}

	occupied := make([][]bool, len(s.layers))
	for l, layer := range s.layers {
		occupied[l] = make([]bool, s.rows)
		for _, n := range layer {
			occupied[l][n.row] = true
		}
	}
	var placed []box
	s.routes = make([]route, len(s.p.links))
	for i, l := range s.p.links {
		pl := plans[i]
		x0, y0 := s.at(pl.left).x+nodeW, ports[i][0]
		x1, y1 := s.at(pl.right).x, ports[i][1]
		r := route{text: fit(l.kind, 16, gapW-14, labelSize), dashed: l.kind == "rejected"}
		var segs []point // from the left note to the right
		var along func(f float64) point
		if pl.lane < 0 {
			segs = []point{{x0, y0}, {x0 + gapW/2, y0}, {x1 - gapW/2, y1}, {x1, y1}}
			along = func(t float64) point { return bezier(segs[0], segs[1], segs[2], segs[3], t) }
		} else {
			y := pl.laneY + track[i]
			segs = []point{
				{x0, y0}, {x0 + gapW/2, y0}, {x0 + gapW/2, y}, {x0 + gapW, y},
				{x1 - gapW, y}, {x1 - gapW/2, y}, {x1 - gapW/2, y1}, {x1, y1},
			}
			along = func(f float64) point { return point{x0 + gapW + f*(x1-x0-2*gapW), y} }
		}
		if pl.reverse {
			slices.Reverse(segs)
		}
		r.path = pathData(segs)
		r.label = along(0.5) // where it goes if no place is clear
		for _, f := range labelPlaces {
			c := route{label: along(f), text: r.text}
			if b := c.labelBox(); !s.hitsNote(b, occupied) && !slices.ContainsFunc(placed, b.overlaps) {
				r.label = c.label
				break
			}
		}
		if r.text != "" {
			placed = append(placed, r.labelBox())
		}
		s.routes[i] = r
	}
}

// labelPlaces are where a link's label may go, in the order tried: the
// fraction of the way along the curve between neighbouring columns, or
// along the lane.
var labelPlaces = []float64{0.5, 0.38, 0.62, 0.26, 0.74, 0.14, 0.86}

// labelBox is the box behind r's label.
func (r route) labelBox() box {
	w := textWidth(r.text, labelSize) + 6
	return box{r.label.x - w/2, r.label.y - 6, w, 12}
}

// hitsNote reports whether b overlaps any note's box.
func (s *scene) hitsNote(b box, occupied [][]bool) bool {
	colW, rowH := nodeW+gapW, nodeH+gapH
	l0 := max(int(math.Floor((b.x-margin)/colW)), 0)
	l1 := min(int(math.Floor((b.x+b.w-margin)/colW)), len(s.layers)-1)
	r0 := max(int(math.Floor((b.y-s.top)/rowH)), 0)
	r1 := min(int(math.Floor((b.y+b.h-s.top)/rowH)), s.rows-1)
	for l := l0; l <= l1; l++ {
		for r := r0; r <= r1; r++ {
			if occupied[l][r] && b.overlaps(box{margin + float64(l)*colW, s.top + float64(r)*rowH, nodeW, nodeH}) {
				return true
			}
		}
	}
	return false
}

// bezier is the point at t on the cubic curve p0 p1 p2 p3.
func bezier(p0, p1, p2, p3 point, t float64) point {
	u := 1 - t
	a, b, c, d := u*u*u, 3*u*u*t, 3*u*t*t, t*t*t
	return point{a*p0.x + b*p1.x + c*p2.x + d*p3.x, a*p0.y + b*p1.y + c*p2.y + d*p3.y}
}

// pathData writes points as SVG path data: a move to the first, then
// cubic curves through each three; between neighbouring columns, one
// curve; along a lane, a curve, a line and a curve.
func pathData(pts []point) string {
	var b []byte
	b = append(b, 'M')
	b = appendPoint(b, pts[0])
	switch len(pts) {
	case 4:
		b = append(b, 'C')
		b = appendPoints(b, pts[1:4])
	case 8:
		b = append(b, 'C')
		b = appendPoints(b, pts[1:4])
		b = append(b, 'L')
		b = appendPoint(b, pts[4])
		b = append(b, 'C')
		b = appendPoints(b, pts[5:8])
	}
	return string(b)
}

func appendPoints(b []byte, pts []point) []byte {
	for i, p := range pts {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendPoint(b, p)
	}
	return b
}

func appendPoint(b []byte, p point) []byte {
	b = appendNum(b, p.x)
	b = append(b, ',')
	return appendNum(b, p.y)
}
