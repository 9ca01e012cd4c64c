package codec

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/queue"
	"go.yaml.in/yaml/v3"
)

var missingHint = map[string]string{
	"id":     "missing: every task needs an id line (snag doctor --fix adds one)",
	"key":    "missing: every task needs a key line such as key: SNAG-12 (snag doctor --fix adds the next free one)",
	"title":  "missing: add a title line",
	"status": "missing: add a status line (status: open)",
}

// field decodes one top-level key into t. Unknown keys are left alone: they
// stay in the file and mean nothing to snag.
func (d *document) field(t *queue.Task, key string, v *yaml.Node) error {
	var err error
	switch key {
	case "id":
		var s string
		if s, err = d.str(key, v); err == nil {
			if !queue.IsID(s) {
				return d.errf(v, key, "%q is not an id (want tsk_ and a 26-character ULID; snag doctor --fix can write a fresh one)", queue.Truncate(s, 40))
			}
			t.ID = queue.IDPrefix + strings.ToUpper(s[len(queue.IDPrefix):])
		}
	case "key":
		var s string
		if s, err = d.str(key, v); err == nil {
			n, aerr := queue.AliasNumber(s)
			if aerr != nil {
				return d.errf(v, key, "%q is not an alias (want SNAG-<n>, like SNAG-12)", queue.Truncate(s, 40))
			}
			t.Key = queue.Alias(n)
		}
	case "title":
		if t.Title, err = d.str(key, v); err == nil && strings.TrimSpace(t.Title) == "" {
			return d.errf(v, key, "empty: give the task a title")
		}
		if strings.ContainsFunc(t.Title, queue.IsControl) {
			return d.errf(v, key, "has a control character: keep the title on one line")
		}
	case "status":
		t.Status, err = enum(d, v, key, queue.Statuses)
	case "trust":
		t.Trust, err = enum(d, v, key, queue.Trusts)
	case "severity":
		t.Severity, err = enum(d, v, key, queue.Severities)
	case "kind":
		t.Kind, err = enum(d, v, key, queue.Kinds)
	case "wave":
		t.Wave, err = d.int(key, v)
	case "plan":
		t.Plan, err = d.str(key, v)
	case "assignee":
		t.Assignee, err = d.str(key, v)
	case "depends_on":
		t.DependsOn, err = d.strs(key, v)
		for _, dep := range t.DependsOn {
			if _, rerr := queue.ParseRef(dep); rerr != nil {
				return d.errf(v, key, "%q is not a task id or alias (want SNAG-<n> or tsk_<ULID>)", queue.Truncate(dep, 40))
			}
		}
	case "suspect_files":
		t.SuspectFiles, err = d.fileRefs(key, v)
	case "source":
		t.Source, err = d.str(key, v)
		if err == nil && !validSource(t.Source) {
			return d.errf(v, key, "%q is not a source (want lower-case letters, like capture)", queue.Truncate(t.Source, 40))
		}
	case "capture":
		t.Capture, err = d.capture(key, v)
	case "verify":
		t.Verify, err = d.verify(key, v)
	case "verified":
		t.Verified, err = d.bool(key, v)
	case "created":
		t.Created, err = d.time(key, v)
	case "updated":
		t.Updated, err = d.time(key, v)
	}
	return err
}

func (d *document) errf(n *yaml.Node, field, format string, args ...any) error {
	return &ParseError{Line: n.Line + d.lineOff, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (d *document) str(field string, n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", d.errf(n, field, "want a single value, not a list or mapping")
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	return n.Value, nil
}

func (d *document) int(field string, n *yaml.Node) (int, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return 0, nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		if i, err := strconv.Atoi(n.Value); err == nil && i >= 0 && i < 1e6 {
			return i, nil
		}
	}
	return 0, d.errf(n, field, "want a whole number from 0, not %q", queue.Truncate(n.Value, 40))
}

func (d *document) bool(field string, n *yaml.Node) (bool, error) {
	if n.Kind == yaml.ScalarNode {
		switch {
		case n.Tag == "!!null":
			return false, nil
		case n.Tag == "!!bool" && strings.EqualFold(n.Value, "true"):
			return true, nil
		case n.Tag == "!!bool":
			return false, nil
		}
	}
	return false, d.errf(n, field, "want true or false, not %q", queue.Truncate(n.Value, 40))
}

var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05", "2006-01-02"}

func (d *document) time(field string, n *yaml.Node) (time.Time, error) {
	s, err := d.str(field, n)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, d.errf(n, field, "%q is not a time (want RFC 3339, like 2026-11-29T10:00:00Z)", queue.Truncate(s, 40))
}

// strs reads a list of scalars, or a single scalar as a list of one.
func (d *document) strs(field string, n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" || n.Value == "" {
			return nil, nil
		}
		return []string{n.Value}, nil
	case yaml.SequenceNode:
		out := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return nil, d.errf(c, field, "want a list of plain values")
			}
			out = append(out, c.Value)
		}
		return out, nil
	}
	return nil, d.errf(n, field, "want a list, like [a, b]")
}

// fileRefs reads suspect_files: a list whose items are {path, lines} mappings
// or strings of the form path, path:12 or path:12-40.
func (d *document) fileRefs(field string, n *yaml.Node) ([]queue.FileRef, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, d.errf(n, field, "want a list of {path: ..., lines: [a, b]}")
	}
	out := make([]queue.FileRef, 0, len(n.Content))
	for _, c := range n.Content {
		var ref queue.FileRef
		switch c.Kind {
		case yaml.ScalarNode:
			r, err := queue.ParseFileRef(c.Value)
			if err != nil {
				return nil, d.errf(c, field, "%v", err)
			}
			ref = r
		case yaml.MappingNode:
			for i := 0; i+1 < len(c.Content); i += 2 {
				k, v := c.Content[i].Value, c.Content[i+1]
				switch k {
				case "path":
					p, err := d.str(field, v)
					if err != nil {
						return nil, err
					}
					ref.Path = p
				case "lines":
					lines, err := d.lines(field, v)
					if err != nil {
						return nil, err
					}
					ref.Lines = lines
				}
			}
		default:
			return nil, d.errf(c, field, "want {path: ..., lines: [a, b]}")
		}
		if err := ref.Check(); err != nil {
			return nil, d.errf(c, field, "%v", err)
		}
		if err := checkRelPath(ref.Path); err != nil {
			return nil, d.errf(c, field, "%v", err)
		}
		out = append(out, ref)
	}
	return out, nil
}

func (d *document) lines(field string, n *yaml.Node) ([2]int, error) {
	var out [2]int
	switch n.Kind {
	case yaml.ScalarNode:
		i, err := d.int(field, n)
		return [2]int{i, i}, err
	case yaml.SequenceNode:
		if len(n.Content) == 0 || len(n.Content) > 2 {
			break
		}
		for i, c := range n.Content {
			v, err := d.int(field, c)
			if err != nil {
				return out, err
			}
			out[i] = v
		}
		if len(n.Content) == 1 {
			out[1] = out[0]
		}
		return out, nil
	}
	return out, d.errf(n, field, "lines: want [start, end] or one line number")
}

// checkRelPath refuses paths that are absolute or climb out of the folder
// they are relative to.
func checkRelPath(p string) error {
	q := strings.ReplaceAll(p, `\`, "/")
	if strings.HasPrefix(q, "/") || (len(q) > 1 && q[1] == ':') {
		return fmt.Errorf("path %q is absolute: write it relative to the repository root", queue.Truncate(p, 60))
	}
	depth := 0
	for _, part := range strings.Split(q, "/") {
		switch part {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return fmt.Errorf("path %q leaves the repository: write it relative to the repository root", queue.Truncate(p, 60))
			}
		default:
			depth++
		}
	}
	return nil
}

func (d *document) capture(field string, n *yaml.Node) (*queue.Capture, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.errf(n, field, "want a mapping with url, anchor, console_errors, screenshots")
	}
	c := &queue.Capture{}
	inSnag := func(v *yaml.Node, key, s string) error {
		if perr := checkRelPath(s); perr != nil || s == "" {
			return d.errf(v, field+"."+key, "%q must be a path inside .snag/, like shots/SNAG-12-0.png", queue.Truncate(s, 60))
		}
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		var err error
		switch k {
		case "url":
			c.URL, err = d.str(field+".url", v)
		case "title":
			c.Title, err = d.str(field+".title", v)
		case "viewport":
			c.Viewport, err = d.viewport(field+".viewport", v)
		case "user_agent":
			c.UserAgent, err = d.str(field+".user_agent", v)
		case "anchor":
			c.Anchor, err = d.str(field+".anchor", v)
		case "anchor_text":
			c.AnchorText, err = d.str(field+".anchor_text", v)
		case "anchor_box":
			c.AnchorBox, err = d.box(field+".anchor_box", v)
		case "scroll":
			c.Scroll, err = d.point(field+".scroll", v)
		case "console_errors":
			c.ConsoleErrors, err = d.strs(field+".console_errors", v)
		case "network_errors":
			c.NetworkErrors, err = d.strs(field+".network_errors", v)
		case "screenshots":
			c.Screenshots, err = d.strs(field+".screenshots", v)
			for _, s := range c.Screenshots {
				if err := inSnag(v, "screenshots", s); err != nil {
					return nil, err
				}
			}
		case "crop":
			c.Crop, err = d.str(field+".crop", v)
			if err == nil && c.Crop != "" {
				err = inSnag(v, "crop", c.Crop)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// viewport reads {width: W, height: H, scale: S}: whole numbers of CSS
// pixels from 1 to 100,000 and a scale above 0 and at most 10 (1 when
// left out).
func (d *document) viewport(field string, n *yaml.Node) (*queue.Viewport, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	nums, err := d.numbers(field, n, "width", "height", "scale")
	if err != nil {
		return nil, err
	}
	v := &queue.Viewport{Width: int(nums["width"]), Height: int(nums["height"]), Scale: nums["scale"]}
	if _, ok := nums["scale"]; !ok {
		v.Scale = 1
	}
	if float64(v.Width) != nums["width"] || float64(v.Height) != nums["height"] || v.Width < 1 || v.Height < 1 ||
		v.Width > 100_000 || v.Height > 100_000 || !(v.Scale > 0 && v.Scale <= 10) {
		return nil, d.errf(n, field, "want {width: 1280, height: 800, scale: 1}: whole pixels from 1 and a scale from above 0 to 10")
	}
	return v, nil
}

// box reads {x: X, y: Y, width: W, height: H} in CSS pixels: sizes from 0,
// every number under a million in size.
func (d *document) box(field string, n *yaml.Node) (*queue.Box, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	nums, err := d.numbers(field, n, "x", "y", "width", "height")
	if err != nil {
		return nil, err
	}
	b := &queue.Box{X: nums["x"], Y: nums["y"], Width: nums["width"], Height: nums["height"]}
	if b.Width < 0 || b.Height < 0 || math.Abs(b.X) >= 1e6 || math.Abs(b.Y) >= 1e6 || b.Width >= 1e6 || b.Height >= 1e6 {
		return nil, d.errf(n, field, "want {x: 10, y: 20, width: 120, height: 40}: sizes from 0, under a million pixels")
	}
	return b, nil
}

// point reads {x: X, y: Y} in CSS pixels, each under a million in size.
func (d *document) point(field string, n *yaml.Node) (*queue.Point, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	nums, err := d.numbers(field, n, "x", "y")
	if err != nil {
		return nil, err
	}
	p := &queue.Point{X: nums["x"], Y: nums["y"]}
	if math.Abs(p.X) >= 1e6 || math.Abs(p.Y) >= 1e6 {
		return nil, d.errf(n, field, "want {x: 0, y: 300}: under a million pixels")
	}
	return p, nil
}

// numbers reads a mapping of the given keys to finite numbers; a key left
// out is not in the map, any other key is refused.
func (d *document) numbers(field string, n *yaml.Node, keys ...string) (map[string]float64, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.errf(n, field, "want a mapping of %s", strings.Join(keys, ", "))
	}
	out := make(map[string]float64, len(keys))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		if !slices.Contains(keys, k) {
			return nil, d.errf(n.Content[i], field, "unknown key %q (want %s)", queue.Truncate(k, 40), strings.Join(keys, ", "))
		}
		f, err := strconv.ParseFloat(v.Value, 64)
		if v.Kind != yaml.ScalarNode || v.Tag != "!!int" && v.Tag != "!!float" || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, d.errf(v, field+"."+k, "want a number, not %q", queue.Truncate(v.Value, 40))
		}
		out[k] = f
	}
	return out, nil
}

// validSource says whether s is a source: lower-case ASCII letters, at
// most 20.
func validSource(s string) bool {
	if s == "" || len(s) > 20 {
		return s == ""
	}
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

func (d *document) verify(field string, n *yaml.Node) (*queue.VerifySpec, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil, nil
		}
		return &queue.VerifySpec{Command: n.Value}, nil
	case yaml.MappingNode:
		v := &queue.VerifySpec{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "command" {
				s, err := d.str(field+".command", n.Content[i+1])
				if err != nil {
					return nil, err
				}
				v.Command = s
			}
		}
		return v, nil
	}
	return nil, d.errf(n, field, "want {command: \"...\"}")
}
