package board

import (
	"bytes"
	"html"
	"html/template"
	"net/url"
	"strings"
)

// Markdown renders task text as HTML that is safe to put in a page: every
// byte of the source is escaped, and only the markup this renderer writes
// itself reaches the page — headings, paragraphs, lists, block quotes, code
// blocks and spans, emphasis, and links whose target is http or https. Raw
// HTML in the source shows as text; a link to any other scheme
// (javascript:, data:, a relative path) shows its text without a link.
//
// With links false no link is made at all: the board renders unvetted text
// that way, so a captured page cannot put a clickable link in front of a
// person.
func Markdown(src []byte, links bool) template.HTML {
	r := renderer{links: links}
	r.blocks(strings.Split(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n"))
	return template.HTML(r.out.String())
}

type renderer struct {
	out   bytes.Buffer
	links bool
}

func (r *renderer) blocks(lines []string) {
	for i := 0; i < len(lines); {
		line := lines[i]
		trim := strings.TrimSpace(line)
		switch {
		case trim == "":
			i++
		case strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~"):
			fence := trim[:3]
			lang := strings.TrimSpace(trim[3:])
			i++
			var code []string
			for i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), fence) {
				code = append(code, lines[i])
				i++
			}
			i++ // the closing fence, or the end
			r.out.WriteString("<pre><code")
			if lang != "" {
				r.out.WriteString(` data-lang="` + html.EscapeString(lang) + `"`)
			}
			r.out.WriteString(">" + html.EscapeString(strings.Join(code, "\n")) + "</code></pre>\n")
		case heading(trim) > 0:
			n := heading(trim)
			level := min(n+1, 6) // the page's own title is the h1
			tag := "h" + string(rune('0'+level))
			text := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(trim[n:]), "#"))
			r.out.WriteString("<" + tag + ">")
			r.inline(text)
			r.out.WriteString("</" + tag + ">\n")
			i++
		case strings.HasPrefix(trim, ">"):
			var quote []string
			for i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), ">") {
				q := strings.TrimPrefix(strings.TrimSpace(lines[i]), ">")
				quote = append(quote, strings.TrimPrefix(q, " "))
				i++
			}
			r.out.WriteString("<blockquote>\n")
			r.blocks(quote)
			r.out.WriteString("</blockquote>\n")
		case listItem(trim) != "":
			kind := listItem(trim)
			var items []string
			for i < len(lines) {
				t := strings.TrimSpace(lines[i])
				if listItem(t) == kind {
					items = append(items, itemText(t))
					i++
					continue
				}
				// A line indented under an item continues it.
				if t != "" && listItem(t) == "" && strings.TrimLeft(lines[i], " \t") != lines[i] {
					items[len(items)-1] += "\n" + t
					i++
					continue
				}
				break
			}
			r.out.WriteString("<" + kind + ">\n")
			for _, it := range items {
				r.out.WriteString("<li>")
				r.inline(it)
				r.out.WriteString("</li>\n")
			}
			r.out.WriteString("</" + kind + ">\n")
		case strings.Trim(trim, "-*_ ") == "" && len(strings.ReplaceAll(trim, " ", "")) >= 3:
			r.out.WriteString("<hr>\n")
			i++
		default:
			var para []string
			for i < len(lines) {
				t := strings.TrimSpace(lines[i])
				if t == "" || strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") || heading(t) > 0 ||
					strings.HasPrefix(t, ">") || listItem(t) != "" {
					break
				}
				para = append(para, t)
				i++
			}
			r.out.WriteString("<p>")
			r.inline(strings.Join(para, "\n"))
			r.out.WriteString("</p>\n")
		}
	}
}

// heading returns the level of an ATX heading line (# to ######), or 0.
func heading(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(line) && line[n] != ' ') {
		return 0
	}
	return n
}

// listItem says which list a line starts an item of: "ul", "ol" or "".
func listItem(line string) string {
	if len(line) >= 2 && strings.ContainsRune("-*+", rune(line[0])) && line[1] == ' ' {
		return "ul"
	}
	d := 0
	for d < len(line) && line[d] >= '0' && line[d] <= '9' {
		d++
	}
	if d > 0 && d < 10 && d+1 < len(line) && (line[d] == '.' || line[d] == ')') && line[d+1] == ' ' {
		return "ol"
	}
	return ""
}

func itemText(line string) string {
	if listItem(line) == "ul" {
		return line[2:]
	}
	_, rest, _ := strings.Cut(line, " ")
	return rest
}

// inline writes one block's text: code spans, links, strong and emphasis;
// everything else escaped.
func (r *renderer) inline(s string) {
	var plain strings.Builder
	flush := func() {
		// A line break inside a block is a soft break, as markdown has it:
		// the browser wraps the text to its width.
		r.out.WriteString(html.EscapeString(plain.String()))
		plain.Reset()
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\\`*_[]()#+-.!<>", s[i+1]) >= 0:
			plain.WriteByte(s[i+1])
			i += 2
			continue
		case c == '`':
			n := run(s[i:], '`')
			if end := strings.Index(s[i+n:], strings.Repeat("`", n)); end >= 0 {
				flush()
				r.out.WriteString("<code>" + html.EscapeString(strings.TrimSpace(s[i+n:i+n+end])) + "</code>")
				i += n + end + n
				continue
			}
		case c == '[':
			if text, target, n, ok := link(s[i:]); ok {
				flush()
				if u := safeURL(target); u != "" && r.links {
					r.out.WriteString(`<a href="` + html.EscapeString(u) + `" rel="nofollow noopener noreferrer">`)
					r.inline(text)
					r.out.WriteString("</a>")
				} else {
					r.out.WriteString(`<span class="inert-link" title="not a link: only http and https links are made, and none in unvetted text">`)
					r.inline(text)
					r.out.WriteString("</span>")
				}
				i += n
				continue
			}
		case c == '*' || c == '_':
			n := min(run(s[i:], c), 2)
			marker := strings.Repeat(string(c), n)
			if end := strings.Index(s[i+n:], marker); end > 0 && s[i+n] != ' ' {
				tag := "em"
				if n == 2 {
					tag = "strong"
				}
				flush()
				r.out.WriteString("<" + tag + ">")
				r.inline(s[i+n : i+n+end])
				r.out.WriteString("</" + tag + ">")
				i += n + end + n
				continue
			}
			plain.WriteString(marker)
			i += n
			continue
		}
		plain.WriteByte(c)
		i++
	}
	flush()
}

// run counts the bytes c that start s.
func run(s string, c byte) int {
	n := 0
	for n < len(s) && s[n] == c {
		n++
	}
	return n
}

// link reads [text](target) at the start of s, and how many bytes it spans.
func link(s string) (text, target string, n int, ok bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				if i+1 >= len(s) || s[i+1] != '(' {
					return "", "", 0, false
				}
				end := strings.IndexByte(s[i+2:], ')')
				if end < 0 {
					return "", "", 0, false
				}
				target = strings.TrimSpace(s[i+2 : i+2+end])
				if t, _, found := strings.Cut(target, " "); found {
					target = t // a "title" after the target is dropped
				}
				return s[1:i], target, i + 2 + end + 1, true
			}
		case '\n':
			return "", "", 0, false
		}
	}
	return "", "", 0, false
}

// safeURL returns the target when it is an absolute http or https URL with
// a host, and "" for anything else.
func safeURL(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || u.User != nil {
		return ""
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return u.String()
	}
	return ""
}
