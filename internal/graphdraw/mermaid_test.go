package graphdraw

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The lines Mermaid writes after its header, one pattern each.
var (
	mmdNode     = regexp.MustCompile(`^\t(n_\w*)\["([^"\n]*)"\]:::(\w+)$`)
	mmdEdge     = regexp.MustCompile(`^\t(n_\w*) (-->|-\.->)(?:\|"([^"\n]*)"\|)? (n_\w*)$`)
	mmdClick    = regexp.MustCompile(`^\tclick (n_\w*) href "([^"\n]*)"$`)
	mmdClassDef = regexp.MustCompile(`^\tclassDef \w+ [\w:#,\- ]+$`)
	mmdClass    = regexp.MustCompile(`^\tclass (n_\w*(?:,n_\w*)*) unvetted$`)
	mmdEntity   = regexp.MustCompile(`#(\w+);`)
)

// mmdNote is a node of a flowchart read back.
type mmdNote struct {
	label, class string
}

// mmdChart is Mermaid text read back.
type mmdChart struct {
	title    string
	nodes    map[string]mmdNote
	order    []string
	edges    []string // "from arrow to kind"
	clicks   map[string]string
	unvetted []string
}

// unMermaid decodes Mermaid's entity codes in a label, and refuses any
// markup but the <br/> between a note's key and title.
func unMermaid(s string) (string, error) {
	if bare := strings.ReplaceAll(s, "<br/>", ""); strings.ContainsAny(bare, "<>") {
		return "", fmt.Errorf("label %q has markup", s)
	}
	if strings.Contains(mmdEntity.ReplaceAllString(s, ""), "#") {
		return "", fmt.Errorf("label %q has a # that is not an entity code", s)
	}
	var err error
	out := mmdEntity.ReplaceAllStringFunc(s, func(m string) string {
		switch name := m[1 : len(m)-1]; name {
		case "quot":
			return `"`
		case "amp":
			return "&"
		case "lt":
			return "<"
		case "gt":
			return ">"
		default:
			n, e := strconv.Atoi(name)
			if e != nil {
				err = fmt.Errorf("unknown entity code %s", m)
			}
			return string(rune(n))
		}
	})
	return strings.ReplaceAll(out, "<br/>", "\n"), err
}

// parseMermaid reads what Mermaid writes, line by line.
func parseMermaid(src string) (*mmdChart, error) {
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	if len(lines) < 5 || lines[0] != "---" || !strings.HasPrefix(lines[1], "title: ") || lines[2] != "---" || lines[3] != "flowchart LR" {
		return nil, fmt.Errorf("header is not front matter with a title and then flowchart LR:\n%s", src)
	}
	title, err := strconv.Unquote(strings.TrimPrefix(lines[1], "title: "))
	if err != nil {
		return nil, fmt.Errorf("title %s: %v", lines[1], err)
	}
	c := &mmdChart{title: title, nodes: make(map[string]mmdNote), clicks: make(map[string]string)}
	if len(lines) == 5 && lines[4] == "\tempty[\"No notes yet\"]" {
		return c, nil
	}
	declared := func(id string) error {
		if _, ok := c.nodes[id]; !ok {
			return fmt.Errorf("%s is used before it is declared", id)
		}
		return nil
	}
	for _, line := range lines[4:] {
		if m := mmdNode.FindStringSubmatch(line); m != nil {
			if _, dup := c.nodes[m[1]]; dup {
				return nil, fmt.Errorf("node id %s twice", m[1])
			}
			label, err := unMermaid(m[2])
			if err != nil {
				return nil, err
			}
			c.nodes[m[1]] = mmdNote{label, m[3]}
			c.order = append(c.order, m[1])
		} else if m := mmdEdge.FindStringSubmatch(line); m != nil {
			for _, id := range []string{m[1], m[4]} {
				if err := declared(id); err != nil {
					return nil, err
				}
			}
			kind, err := unMermaid(m[3])
			if err != nil {
				return nil, err
			}
			c.edges = append(c.edges, strings.TrimSpace(m[1]+" "+m[2]+" "+m[4]+" "+kind))
		} else if m := mmdClick.FindStringSubmatch(line); m != nil {
			if err := declared(m[1]); err != nil {
				return nil, err
			}
			c.clicks[m[1]] = m[2]
		} else if m := mmdClass.FindStringSubmatch(line); m != nil {
			c.unvetted = strings.Split(m[1], ",")
		} else if !mmdClassDef.MatchString(line) {
			return nil, fmt.Errorf("unexpected line %q", line)
		}
	}
	return c, nil
}

func TestMermaid(t *testing.T) {
	c, err := parseMermaid(string(Mermaid(realistic())))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"n_1", "n_2", "n_3", "n_4", "n_5", "n_6"}, c.order); diff != "" {
		t.Errorf("node ids (-want +got):\n%s", diff)
	}
	if got, want := c.nodes["n_4"], (mmdNote{"N-4\nUse SQLite FTS5 for search", "decision"}); got != want {
		t.Errorf("n_4 = %+v, want %+v", got, want)
	}
	want := []string{
		"n_4 --> n_1 took_from",
		"n_4 --> n_2 chose",
		"n_4 -.-> n_3 rejected",
		"n_5 --> n_4 took_from",
		"n_6 --> n_5 took_from",
		"n_4 --> n_6 led_to",
		"n_6 --> n_1 relates",
	}
	if diff := cmp.Diff(want, c.edges); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"n_2", "n_3", "n_5"}, c.unvetted); diff != "" {
		t.Errorf("unvetted (-want +got):\n%s", diff)
	}
	if got := c.clicks["n_6"]; got != "/notes/N-6" {
		t.Errorf("n_6 links to %q, want /notes/N-6", got)
	}
}

func TestMermaidHostile(t *testing.T) {
	out := Mermaid(hostile())
	c, err := parseMermaid(string(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got, want := c.title, `<script>alert("t")</script> & "graph"`; got != want {
		t.Errorf("title = %q, want %q", got, want)
	}
	for id, want := range map[string]mmdNote{
		"n_1":             {"N-1\n</title><script>alert(\"x\")<…", "goal"},
		"n_2":             {"N-2\nTom & \"Jerry\" <b>bold</b>…", "decision"},
		"n_3":             {"N-3\n" + `back\slash \N "end\`, "other"},
		"n_N__6___x____y": {`N-"6"; x -> y` + "\n]]> <![CDATA[ x ]]>", "action"},
	} {
		if got := c.nodes[id]; got != want {
			t.Errorf("%s = %+v, want %+v", id, got, want)
		}
	}
	if got, want := c.edges[0], `n_2 --> n_1 chose|"x"`; got != want {
		t.Errorf("first edge %q, want %q", got, want)
	}
	if got, want := c.clicks["n_1"], `/notes/N-1?a=1&b=%222%22`; got != want || len(c.clicks) != 1 {
		t.Errorf("clicks %v, want only n_1 to %s", c.clicks, want)
	}
}

func TestMermaidIDs(t *testing.T) {
	var notes []*note
	for _, k := range []string{"N-4", "N-04", "4", "N_4", "n-4", "end", "N-", "日本", "N-4x"} {
		notes = append(notes, &note{key: k})
	}
	want := []string{"n_4", "n_04", "n_4_2", "n_N_4", "n_n_4", "n_end", "n_N_", "n___", "n_N_4x"}
	if diff := cmp.Diff(want, mermaidIDs(notes)); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}

func TestMermaidEmpty(t *testing.T) {
	c, err := parseMermaid(string(Mermaid(Graph{})))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.nodes) != 0 || c.title != defaultTitle {
		t.Errorf("empty chart: %+v", c)
	}
}
