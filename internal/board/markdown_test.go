package board_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/board"
)

func TestBoardMarkdown(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		links    bool
		want     string
	}{
		{"heading", "# Title\n\n## Sub", true, "<h2>Title</h2>\n<h3>Sub</h3>\n"},
		{"paragraph", "one\ntwo\n\nthree", true, "<p>one\ntwo</p>\n<p>three</p>\n"},
		{"emphasis", "a **b** *c* _d_ `e<f>`", true, "<p>a <strong>b</strong> <em>c</em> <em>d</em> <code>e&lt;f&gt;</code></p>\n"},
		{"list", "- a\n- b\n\n1. x\n2. y", true, "<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n<ol>\n<li>x</li>\n<li>y</li>\n</ol>\n"},
		{"list item over two lines", "- one\n  more\n- two", true, "<ul>\n<li>one\nmore</li>\n<li>two</li>\n</ul>\n"},
		{"code block", "```go\nif a < b {}\n```", true, "<pre><code data-lang=\"go\">if a &lt; b {}</code></pre>\n"},
		{"quote", "> said\n> so", true, "<blockquote>\n<p>said\nso</p>\n</blockquote>\n"},
		{"http link", "[docs](https://example.com/a?b=1&c=2)", true,
			`<p><a href="https://example.com/a?b=1&amp;c=2" rel="nofollow noopener noreferrer">docs</a></p>` + "\n"},
		{"link in unvetted text", "[docs](https://example.com/)", false,
			`<p><span class="inert-link" title="not a link: only http and https links are made, and none in unvetted text">docs</span></p>` + "\n"},
		{"javascript link", "[click](javascript:alert(1))", true,
			`<p><span class="inert-link" title="not a link: only http and https links are made, and none in unvetted text">click</span>)</p>` + "\n"},
		{"raw html", "<script>alert(1)</script>\n<img src=x onerror=alert(1)>", true,
			"<p>&lt;script&gt;alert(1)&lt;/script&gt;\n&lt;img src=x onerror=alert(1)&gt;</p>\n"},
		{"quotes in a link", `[x](https://e.com/"onmouseover="alert(1))`, true,
			`<p><a href="https://e.com/%22onmouseover=%22alert%281" rel="nofollow noopener noreferrer">x</a>)</p>` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(board.Markdown([]byte(tc.in), tc.links))
			if got != tc.want {
				t.Errorf("Markdown(%q):\n got %q\nwant %q", tc.in, got, tc.want)
			}
			checkSafe(t, got)
		})
	}
}

var (
	tagRE  = regexp.MustCompile(`<(/?)([a-zA-Z0-9]+)([^>]*)>`)
	attrRE = regexp.MustCompile(`\s([a-z-]+)="([^"]*)"`)
	allow  = map[string]bool{"h2": true, "h3": true, "h4": true, "h5": true, "h6": true, "p": true, "ul": true,
		"ol": true, "li": true, "pre": true, "code": true, "blockquote": true, "strong": true, "em": true, "a": true,
		"span": true, "hr": true}
	attrs = map[string]bool{"href": true, "rel": true, "class": true, "title": true, "data-lang": true}
)

// checkSafe fails when rendered markdown holds a tag or attribute the
// renderer does not write itself, or a link that is not http(s).
func checkSafe(t *testing.T, out string) {
	t.Helper()
	for _, m := range tagRE.FindAllStringSubmatch(out, -1) {
		if !allow[strings.ToLower(m[2])] {
			t.Fatalf("tag <%s> in %q", m[2], out)
		}
		rest := attrRE.ReplaceAllStringFunc(m[3], func(a string) string {
			am := attrRE.FindStringSubmatch(a)
			if !attrs[am[1]] {
				t.Fatalf("attribute %s in %q", am[1], out)
			}
			if am[1] == "href" && !strings.HasPrefix(am[2], "http://") && !strings.HasPrefix(am[2], "https://") {
				t.Fatalf("href %q in %q", am[2], out)
			}
			return ""
		})
		if strings.TrimSpace(rest) != "" {
			t.Fatalf("stray markup %q in tag of %q", rest, out)
		}
	}
	if strings.Contains(strings.ToLower(out), "javascript:") && strings.Contains(out, `href="javascript`) {
		t.Fatalf("javascript: link in %q", out)
	}
}

func FuzzBoardMarkdown(f *testing.F) {
	for _, s := range []string{"# a", "[x](javascript:alert(1))", "<script>x</script>", "**a *b* `c`**", "- [a](http://x/)\n> q",
		"```\n<b>\n```", "[[x](y)](http://a/)", "\\*not\\*", "<a href=\"javascript:x\">y</a>", "[a](HTTPS://X/\")"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkSafe(t, string(board.Markdown([]byte(s), true)))
		checkSafe(t, string(board.Markdown([]byte(s), false)))
	})
}
