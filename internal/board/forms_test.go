package board_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBoardTaskForms is a person's day on the board, in real Chromium: add
// a task from the board's form by keyboard, edit its fields on its page,
// be refused a dependency on no task (nothing written), mark it done, and
// cancel another. Each lands in the file and the audit log, and the forms,
// open, are drawn at 1280 and 390 px in light and dark and checked with
// axe-core (no serious or critical finding).
func TestBoardTaskForms(t *testing.T) {
	src, axeErr := axeSource()
	if axeErr != nil && os.Getenv("CI") != "" {
		t.Fatalf("CI is set: the forms' accessibility rules must run (.ci/run installs axe-core): %v", axeErr)
	}
	root := sampleProject(t)
	d := startDaemon(t, root)
	b := newBrowser(t)
	b.login(d)
	const live = `document.querySelector("#live").textContent === "live"`

	dir := os.Getenv("SNAG_BOARD_SHOTS")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "shots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// shoot draws the page at path with the form open in each size and
	// scheme, freshly loaded in it (a card's colour fades in on a change
	// of scheme), and checks it with axe-core.
	shoot := func(name, path, open string) {
		t.Helper()
		for _, size := range []struct{ w, h int64 }{{1280, 900}, {390, 844}} {
			for _, scheme := range []string{"light", "dark"} {
				b.scheme(size.w, size.h, scheme)
				b.open(d.url(path))
				b.waitFor(name, `document.querySelector("`+open+`") && `+live)
				evalIn[bool](b, `(document.querySelector("`+open+`").open = true)`)
				shot := name + "-" + map[int64]string{1280: "1280", 390: "390"}[size.w]
				if scheme == "dark" {
					shot += "-dark"
				}
				b.shoot(dir, shot, int(size.w), src)
			}
		}
		b.scheme(1280, 900, "light")
	}

	// The board's form, drawn open, then used by keyboard alone: Tab to
	// its summary, Enter opens it, the fields are typed, Enter sends it.
	if axeErr == nil {
		shoot("board-add", "/", "#add-task")
	}
	b.open(d.url("/"))
	b.waitFor("the board", `document.querySelector("#add-task") && `+live)
	for i := 0; i < 20 && !evalIn[bool](b, `document.activeElement.matches("#add-task summary")`); i++ {
		b.do(chromedp.KeyEvent("\t"))
	}
	if !evalIn[bool](b, `document.activeElement.matches("#add-task summary")`) {
		t.Fatalf("Tab never reached the form's summary; it stopped on %s", evalIn[string](b, `document.activeElement.outerHTML.slice(0, 200)`))
	}
	b.do(chromedp.KeyEvent("\r"))
	b.waitFor("the form to open", `document.querySelector("#add-task").open`)
	b.do(chromedp.KeyEvent("\t"))
	if !evalIn[bool](b, `document.activeElement.id === "add-title"`) {
		t.Fatalf("the Tab after the summary lands on %s, want the title", evalIn[string](b, `document.activeElement.outerHTML.slice(0, 200)`))
	}
	b.typeInto("#add-title", "Wishlist heart does not fill in")
	b.do(
		chromedp.SetValue(chromedp.CSS(`#add-kind`), "ux"),
		chromedp.SetValue(chromedp.CSS(`#add-severity`), "high"),
		chromedp.SetValue(chromedp.CSS(`#add-files`), "web/wishlist.ts:3-9\nweb/heart.css"),
		chromedp.SetValue(chromedp.CSS(`#add-deps`), "SNAG-3"),
		chromedp.SetValue(chromedp.CSS(`#add-body`), "Tap the heart: nothing."),
	)
	b.do(chromedp.Focus(chromedp.CSS(`#add-title`)), chromedp.KeyEvent("\r"))
	b.waitFor("the new task's page", `location.pathname === "/task/SNAG-21" && document.querySelector("#edit-task") && `+live)
	file := readFile(t, taskFile(t, root, "SNAG-21"))
	for _, want := range []string{"\ntitle: Wishlist heart does not fill in\n", "\nstatus: open\n", "\ntrust: vetted\n",
		"\nseverity: high\n", "\nkind: ux\n", "  - {path: web/wishlist.ts, lines: [3, 9]}\n", "  - {path: web/heart.css}\n",
		"\ndepends_on: [tsk_01M6JVE3WEXHX1PAX0DDNE2B4Q] # SNAG-3\n", "\nTap the heart: nothing.\n"} {
		if !strings.Contains(file, want) {
			t.Errorf("the added task's file lacks %q:\n%s", strings.TrimSpace(want), file)
		}
	}

	// Its page's edit form, drawn open, then used.
	if axeErr == nil {
		shoot("task-edit", "/task/SNAG-21", "#edit-task")
	}
	evalIn[bool](b, `(document.querySelector("#edit-task").open = true)`)
	if got := evalIn[string](b, `document.querySelector("#edit-deps").value`); got != "SNAG-3" {
		t.Errorf("the edit form's depends on starts as %q, want SNAG-3", got)
	}
	evalIn[bool](b, `(document.querySelector("#edit-title").value = "") === ""`)
	b.typeInto("#edit-title", "Wishlist heart stays empty")
	b.do(
		chromedp.SetValue(chromedp.CSS(`#edit-severity`), "critical"),
		chromedp.SetValue(chromedp.CSS(`#edit-wave`), "2"),
		chromedp.SetValue(chromedp.CSS(`#edit-deps`), "SNAG-12"),
	)
	b.click(`#edit-task button[type=submit]`)
	b.waitFor("the edit said", `document.querySelector("#flash").textContent.includes("severity high -> critical")`)
	b.waitFor("the page to show it", `document.querySelector("h1").textContent.includes("Wishlist heart stays empty")`)
	file = readFile(t, taskFile(t, root, "SNAG-21"))
	for _, want := range []string{"\ntitle: Wishlist heart stays empty\n", "\nseverity: critical\n", "\nwave: 2\n",
		"\ndepends_on: [tsk_01M7MQ69QSHGZWDAA2TC1ZGK28] # SNAG-12\n", "\nTap the heart: nothing.\n"} {
		if !strings.Contains(file, want) {
			t.Errorf("the edited file lacks %q:\n%s", strings.TrimSpace(want), file)
		}
	}
	if !evalIn[bool](b, `document.querySelector("#edit-task").open`) {
		t.Error("the edit form closed when the page showed the change")
	}

	// A dependency on no task: refused, said, nothing written.
	before := file
	evalIn[bool](b, `(document.querySelector("#edit-deps").value = "SNAG-12, SNAG-404") !== ""`)
	b.click(`#edit-task button[type=submit]`)
	b.waitFor("the refusal said", `document.querySelector("#flash.error") && document.querySelector("#flash").textContent.includes("no task SNAG-404")`)
	if got := readFile(t, taskFile(t, root, "SNAG-21")); got != before {
		t.Errorf("a refused edit changed the file:\n%s", got)
	}

	// Mark done: resolved on a person's word, not verified.
	b.click(`#task .actions form[action$="/accept"] button`)
	b.waitFor("SNAG-21 resolved", `document.querySelector("#task .status").textContent === "resolved"`)
	if f := readFile(t, taskFile(t, root, "SNAG-21")); !strings.Contains(f, "\nstatus: resolved\n") || strings.Contains(f, "verified: true") {
		t.Errorf("after Mark done:\n%s", f)
	}

	// Cancel another open task from its page.
	b.open(d.url("/task/SNAG-11"))
	b.waitFor("SNAG-11's page", `document.querySelector('#task .actions form[action$="/cancel"] button') && `+live)
	b.click(`#task .actions form[action$="/cancel"] button`)
	b.waitFor("SNAG-11 cancelled", `document.querySelector("#task .status").textContent === "cancelled"`)

	var audit struct {
		Entries []struct{ Actor, Agent, Action, Outcome, Detail string } `json:"entries"`
	}
	if code := d.get("/audit?limit=1000", &audit); code != http.StatusOK {
		t.Fatalf("GET /audit: %d", code)
	}
	found := map[string]bool{}
	for _, e := range audit.Entries {
		if e.Actor == "person" && e.Agent == "dana" {
			found[e.Action+" "+e.Outcome] = true
		}
	}
	for _, want := range []string{"add ok", "edit ok", "edit refused", "accept ok", "cancel ok"} {
		if !found[want] {
			t.Errorf("the audit log has no %q by dana: %+v", want, audit.Entries)
		}
	}
	if axeErr != nil {
		t.Skipf("the forms worked, but were not checked: %v", axeErr)
	}
}
