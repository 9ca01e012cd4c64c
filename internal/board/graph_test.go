package board_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// The decision graph on the board, in a real snagd and a real Chromium,
// over the sample project's notes (.snag-example/notes: a goal, options,
// a decision that chose one and rejected another, an outcome, and an
// observation borrowed from another branch) and a note in a second git
// worktree: the graph page draws every note as SVG, follows new notes
// live, filters, and reads with a keyboard; a note's page lists its links
// both ways and says when its file is on a branch not merged here; a
// task's page lists the notes that name it.

// spikeBranch is the branch of the second worktree.
const spikeBranch = "spike/quote-cache"

// writeNote writes a note file into dir, as a person saving one by hand.
func writeNote(t *testing.T, dir string, n *queue.Note) {
	t.Helper()
	if n.ID == "" {
		n.ID = "note_" + strings.TrimPrefix(queue.NewID(n.Created), queue.IDPrefix)
	}
	if n.Trust == "" {
		n.Trust = queue.TrustVetted
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, queue.NoteFileName(n.Key, n.Title)), codec.FormatNote(n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// git runs git in dir, with an identity of its own and no signing.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=snag test", "-c", "user.email=test@snag.invalid",
		"-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// nextNote is the key after the highest one of the note files in dirs.
func nextNote(dirs ...string) string {
	top := 0
	for _, dir := range dirs {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			key, _, _ := strings.Cut(e.Name(), " ")
			top = max(top, queue.NoteNum(key))
		}
	}
	return queue.NoteAlias(top + 1)
}

// elsewhere is a note written in another worktree, on a branch not
// merged into snagd's.
type elsewhere struct {
	key, title, wt string
}

// addWorktreeNote makes root a git repository on main with a second
// worktree on spikeBranch, and writes there an agent's observation, an
// hour after the oldest of root's notes (it links to none, so the picture
// keeps the sample's columns).
func addWorktreeNote(t *testing.T, root string) elsewhere {
	t.Helper()
	git(t, root, "init", "-q", "-b", "main")
	git(t, root, "commit", "-q", "--allow-empty", "-m", "start")
	e := elsewhere{wt: filepath.Join(t.TempDir(), "spike"), title: "Four in five carts ask for the same quote twice"}
	git(t, root, "worktree", "add", "-q", "-b", spikeBranch, e.wt)
	own := filepath.Join(root, ".snag", queue.NotesFolder)
	e.key = nextNote(own)
	n := &queue.Note{Key: e.key, Type: "observation", Title: e.title, Branch: spikeBranch, Trust: queue.TrustUnvetted, Author: "LYNX",
		Created: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Tasks: []string{"SNAG-3"}, Body: []byte("Measured on the spike branch over a day of traffic.\n")}
	var oldest *queue.Note
	ents, _ := os.ReadDir(own)
	for _, f := range ents {
		raw, _ := os.ReadFile(filepath.Join(own, f.Name()))
		if o, err := codec.ParseNote(raw); err == nil && !o.Created.IsZero() && (oldest == nil || o.Created.Before(oldest.Created)) {
			oldest = o
		}
	}
	if oldest != nil {
		n.Created = oldest.Created.Add(time.Hour)
	}
	writeNote(t, filepath.Join(e.wt, ".snag", queue.NotesFolder), n)
	return e
}

// apiGraph is GET /graph's answer, as much as the tests read.
type apiGraph struct {
	Nodes []apiNote
	Links []apiLink
}

type apiNote struct {
	Key, Title, Type, Branch, Commit, Trust, Worktree string
	Tasks                                             []string
}

type apiLink struct{ From, To, Kind, Why, Trust string }

// graph reads GET /graph?query.
func (d *daemon) graph(query string) apiGraph {
	d.t.Helper()
	var g apiGraph
	if code := d.get("/graph?"+query, &g); code != http.StatusOK {
		d.t.Fatalf("GET /graph?%s: %d", query, code)
	}
	return g
}

func (g apiGraph) keys() []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.Key)
	}
	slices.Sort(out)
	return out
}

func (g apiGraph) node(key string) apiNote {
	for _, n := range g.Nodes {
		if n.Key == key {
			return n
		}
	}
	return apiNote{}
}

// busiest is the note with the most links out (the sample's decision),
// its links out and its links in.
func (g apiGraph) busiest() (apiNote, []apiLink, []apiLink) {
	var best apiNote
	var out, in []apiLink
	for _, n := range g.Nodes {
		var o, i []apiLink
		for _, l := range g.Links {
			if l.From == n.Key {
				o = append(o, l)
			}
			if l.To == n.Key {
				i = append(i, l)
			}
		}
		if len(o) > len(out) || (len(o) == len(out) && len(i) > len(in)) {
			best, out, in = n, o, i
		}
	}
	return best, out, in
}

// svgKeys are the notes the graph page's picture links to, sorted.
func svgKeys(b *browser) []string {
	b.t.Helper()
	got := evalIn[[]string](b, `[...document.querySelectorAll("#graph svg a")].map(a => a.getAttribute("href").replace("/team/notes/", ""))`)
	slices.Sort(got)
	return got
}

// page reads a board page over HTTP with the token, as a script would.
func (d *daemon) page(path string) string {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.url(path), nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp := d.raw(req)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, b)
	}
	return string(b)
}

var hrefKey = regexp.MustCompile(`<a href="/team/notes/(N-[0-9]+)" aria-label=`)

// pictureKeys are the notes a graph page's picture links to, sorted (the
// picture's links carry an aria-label; the list's do not).
func pictureKeys(page string) []string {
	var out []string
	for _, m := range hrefKey.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out
}

// label is a link kind as the board writes it: took_from is "took from".
func label(kind string) string { return strings.ReplaceAll(kind, "_", " ") }

// linkTo is how a page links to a note: its key, then its title.
func linkTo(n apiNote) string {
	return `<a href="/team/notes/` + n.Key + `"><span class="key">` + n.Key + `</span> ` + html.EscapeString(n.Title) + `</a>`
}

func TestBoardGraph(t *testing.T) {
	root := sampleProject(t)
	spike := addWorktreeNote(t, root)
	d := startDaemon(t, root)
	all := d.graph("")
	if len(all.Links) == 0 || len(all.Nodes) < 6 {
		t.Fatalf("the sample project's graph has %d notes and %d links: .snag-example/notes should hold a small decision graph", len(all.Nodes), len(all.Links))
	}
	decision, out, in := all.busiest()

	b := newBrowser(t)
	b.login(d)
	// The board's CSP allows no inline script or style: the page, and the
	// picture in it, must need none.
	b.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.__csp = []; document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + ": " + (e.sample || e.blockedURI)))`})
		return err
	}))
	b.open(d.url("/team/graph"))
	b.waitFor("the graph, live", `document.querySelector("#graph svg a") && document.querySelector("#live").textContent === "live"`)
	shotGraph(t, b, "graph-sample-1280")

	t.Run("draws every note", func(t *testing.T) {
		if got, want := svgKeys(b), all.keys(); !slices.Equal(got, want) {
			t.Errorf("the picture links to %v; want every note of the graph, %v", got, want)
		}
		if !slices.Contains(svgKeys(b), spike.key) {
			t.Errorf("the picture lacks %s, the note of the other worktree", spike.key)
		}
		if v := evalIn[[]string](b, `window.__csp`); len(v) > 0 {
			t.Errorf("the graph page breaks the board's Content-Security-Policy: %q", v)
		}
		if role := evalIn[string](b, `document.querySelector("#graph svg").getAttribute("role")`); role != "graphics-document" {
			t.Errorf("the picture's role is %q; want graphics-document, as it holds links", role)
		}
		list := b.text("#graph .graph-list")
		for _, n := range all.Nodes {
			if !strings.Contains(list, n.Key+" "+n.Title) {
				t.Errorf("the list under the picture lacks %s %s", n.Key, n.Title)
			}
		}
		if got := evalIn[int](b, `document.querySelectorAll("#graph .graph-links li").length`); got != len(all.Links) {
			t.Errorf("the list under the picture has %d links; the graph has %d", got, len(all.Links))
		}
		for _, l := range all.Links {
			if want := label(l.Kind) + " " + l.To + " " + all.node(l.To).Title; !strings.Contains(list, want) {
				t.Errorf("the list under the picture lacks %s's link %q", l.From, want)
			}
		}
		if got := evalIn[string](b, `document.querySelector('#nav a[href="/team/graph"]').getAttribute("aria-current")`); got != "page" {
			t.Errorf("the Graph tab is not marked current: %q", got)
		}
	})

	t.Run("fits a wide window, scrolls on a phone and says so", func(t *testing.T) {
		const fits = `(p => p.scrollWidth <= p.clientWidth)(document.querySelector("#graph-picture"))`
		if !evalIn[bool](b, fits) {
			t.Errorf("at 1280 px the sample's picture scrolls: %d px in %d", evalIn[int](b, `document.querySelector("#graph-picture").scrollWidth`),
				evalIn[int](b, `document.querySelector("#graph-picture").clientWidth`))
		}
		if evalIn[bool](b, `!document.querySelector("#graph-hint").hidden`) {
			t.Error("at 1280 px, where the picture fits, the page says it scrolls")
		}
		b.scheme(390, 844, "light")
		defer b.scheme(1280, 900, "light")
		b.waitFor("the hint that the picture scrolls", `!document.querySelector("#graph-hint").hidden && document.querySelector("#graph-hint").offsetHeight > 0`)
		if evalIn[bool](b, fits) || evalIn[int](b, `document.documentElement.scrollWidth`) > 390 {
			t.Errorf("at 390 px the picture is %d px in a box of %d, and the page %d px wide; want the box, not the page, to scroll",
				evalIn[int](b, `document.querySelector("#graph-picture").scrollWidth`), evalIn[int](b, `document.querySelector("#graph-picture").clientWidth`),
				evalIn[int](b, `document.documentElement.scrollWidth`))
		}
		if got := evalIn[string](b, `getComputedStyle(document.querySelector("#graph-picture")).overflowX`); got != "auto" {
			t.Errorf("the picture's box has overflow-x %q", got)
		}
	})

	next := nextNote(filepath.Join(root, ".snag", queue.NotesFolder), filepath.Join(spike.wt, ".snag", queue.NotesFolder))
	t.Run("a new note appears live", func(t *testing.T) {
		// The page fetches itself once when it goes live: the note is
		// written after that, so only its event can bring it.
		b.waitFor("the page's refresh on going live", `performance.getEntriesByType("resource").some(e => e.initiatorType === "fetch" && e.name === location.href && e.responseEnd > 0)`)
		evalIn[bool](b, `window.__stayed = true`)
		focus := fmt.Sprintf(`#graph svg a[href="/team/notes/%s"]`, decision.Key)
		evalIn[bool](b, `(document.querySelector('`+focus+`').focus(), true)`)
		writeNote(t, filepath.Join(root, ".snag", queue.NotesFolder), &queue.Note{Key: next, Type: "action", Title: "Warm the quote cache on deploy",
			Branch: "main", Created: time.Now().UTC().Truncate(time.Second), Links: []queue.Link{{To: decision.Key, Kind: "took_from"}}})
		b.waitFor(next+" in the picture", `document.querySelector('#graph svg a[href="/team/notes/`+next+`"]')`)
		if !evalIn[bool](b, `window.__stayed === true`) {
			t.Error("the page reloaded to show the new note")
		}
		if !evalIn[bool](b, `document.activeElement.matches('`+focus+`')`) {
			t.Errorf("the focus moved when the picture was redrawn: it is on %s", evalIn[string](b, `document.activeElement.outerHTML.slice(0, 200)`))
		}
		if !strings.Contains(b.text("#graph .graph-list"), "took from "+decision.Key) {
			t.Error("the list under the picture does not show the new note's link")
		}
	})

	t.Run("branch filter", func(t *testing.T) {
		b.do(chromedp.SetValue(`select[name="branch"]`, spikeBranch))
		b.click(`form.filters button[type="submit"]`)
		b.waitFor("the filtered graph", `new URLSearchParams(location.search).get("branch") === "`+spikeBranch+`" && document.querySelector("#graph svg a")`)
		if got := svgKeys(b); !slices.Equal(got, []string{spike.key}) {
			t.Errorf("on branch %s the picture links to %v; want %v", spikeBranch, got, []string{spike.key})
		}
		if got := evalIn[string](b, `document.querySelector('select[name="branch"]').value`); got != spikeBranch {
			t.Errorf("the branch select shows %q after filtering", got)
		}
		if got, want := b.text("#graph .note"), fmt.Sprintf("1 note of %d", len(all.Nodes)+1); !strings.Contains(got, want) {
			t.Errorf("the filtered graph says %q; want %q", got, want)
		}
	})

	t.Run("type, plan and task filters", func(t *testing.T) {
		all := d.graph("") // with the new note
		var tasks struct{ Tasks []struct{ Key string } }
		d.get("/tasks?plan=checkout-revamp&all=true&limit=500", &tasks)
		var ofPlan []string
		for _, n := range all.Nodes {
			if slices.ContainsFunc(n.Tasks, func(k string) bool {
				return slices.ContainsFunc(tasks.Tasks, func(t struct{ Key string }) bool { return t.Key == k })
			}) {
				ofPlan = append(ofPlan, n.Key)
			}
		}
		slices.Sort(ofPlan)
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"type=option", d.graph("type=option").keys()},
			{"task=snag-1", d.graph("task=SNAG-1").keys()}, // a key as typed
			{"branch=main&type=goal", d.graph("branch=main&type=goal").keys()},
			{"plan=checkout-revamp", ofPlan},
			{"branch=nowhere", nil},
		} {
			if tc.query != "branch=nowhere" && (len(tc.want) == 0 || len(tc.want) == len(all.Nodes)) {
				t.Errorf("%s picks %d of the %d notes: the sample does not test it", tc.query, len(tc.want), len(all.Nodes))
			}
			page := d.page("/team/graph?" + tc.query)
			if got := pictureKeys(page); !slices.Equal(got, tc.want) {
				t.Errorf("/team/graph?%s draws %v; want %v", tc.query, got, tc.want)
			}
			if tc.want == nil && !strings.Contains(page, "No note matches the filter") {
				t.Errorf("/team/graph?%s does not say that nothing matches", tc.query)
			}
		}
	})

	t.Run("keyboard", func(t *testing.T) {
		b.open(d.url("/team/graph"))
		b.waitFor("the graph", `document.querySelector("#graph svg a")`)
		const inPicture = `document.activeElement.matches("#graph svg a")`
		for i := 0; i < 40 && !evalIn[bool](b, inPicture); i++ {
			b.do(chromedp.KeyEvent("\t"))
		}
		if !evalIn[bool](b, inPicture) {
			t.Fatalf("Tab never reached a note in the picture; it stopped on %s", evalIn[string](b, `document.activeElement.outerHTML.slice(0, 200)`))
		}
		shotGraph(t, b, "graph-focus-1280")
		href := evalIn[string](b, `document.activeElement.getAttribute("href")`)
		if label := evalIn[string](b, `document.activeElement.getAttribute("aria-label")`); !strings.HasPrefix(label, strings.TrimPrefix(href, "/team/notes/")+" ") {
			t.Errorf("the focused note %s is named %q", href, label)
		}
		b.do(chromedp.KeyEvent("\r"))
		b.waitFor("the note's page", `location.pathname === "`+href+`" && document.querySelector("#note h1")`)
	})

	t.Run("a note's links both ways", func(t *testing.T) {
		page := d.page("/team/notes/" + decision.Key)
		want := []string{">Links</h2>", ">Linked from</h2>", "<code>" + html.EscapeString(decision.Branch) + "</code>"}
		if decision.Commit != "" {
			want = append(want, "<code>"+decision.Commit[:12]+"</code>")
		}
		for _, l := range out {
			want = append(want, `<span class="kind">`+label(l.Kind)+`</span> `+linkTo(all.node(l.To)), html.EscapeString(l.Why))
			if l.Trust != "" {
				want = append(want, `<span class="trust trust-`+l.Trust+`">`+l.Trust+` link</span>`)
			}
		}
		for _, l := range in {
			want = append(want, linkTo(all.node(l.From))+` <span class="kind">`+label(l.Kind)+`</span> this`)
		}
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("%s's page lacks %q", decision.Key, w)
			}
		}
		page = d.page("/team/notes/" + spike.key)
		for _, w := range []string{"On branch " + spikeBranch + ", not in this worktree yet", "<code>" + spike.wt, "trust-unvetted"} {
			if !strings.Contains(page, w) {
				t.Errorf("%s's page lacks %q", spike.key, w)
			}
		}
		if page := d.page("/team/notes/" + decision.Key); strings.Contains(page, "not in this worktree") {
			t.Errorf("%s, in snagd's own worktree, says it is not", decision.Key)
		}
	})

	t.Run("a task's notes", func(t *testing.T) {
		page := d.page("/task/SNAG-1")
		about := d.graph("task=SNAG-1")
		for _, n := range about.Nodes {
			if !strings.Contains(page, linkTo(n)) {
				t.Errorf("SNAG-1's page does not list %s, which names it", n.Key)
			}
		}
		if got := strings.Count(page, `<a href="/team/notes/`); got != len(about.Nodes) {
			t.Errorf("SNAG-1's page links to %d notes; %d name it", got, len(about.Nodes))
		}
		var tasks struct{ Tasks []struct{ Key string } }
		d.get("/tasks?all=true&limit=500", &tasks)
		for _, task := range tasks.Tasks {
			if len(d.graph("task="+task.Key).Nodes) == 0 {
				if page := d.page("/task/" + task.Key); !strings.Contains(page, "No note names this task.") {
					t.Errorf("%s's page does not say that no note names it", task.Key)
				}
				return
			}
		}
		t.Error("every task of the sample is named by a note: none to check the empty list on")
	})
}

// shotGraph writes a screenshot of what the browser shows to name.png in
// $SNAG_BOARD_SHOTS, when that is set.
func shotGraph(t *testing.T, b *browser, name string) {
	t.Helper()
	dir := os.Getenv("SNAG_BOARD_SHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}
