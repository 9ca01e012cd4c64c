package index_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskgen"
)

func TestListOrder(t *testing.T) {
	e := newEnv(t)
	at := func(h int) func(*queue.Task) { return withCreated(taskClock.Add(time.Duration(h) * time.Hour)) }
	same := taskClock.Add(99 * time.Hour)
	tie1 := task(8, "Same time, lower id", withCreated(same), withID("tsk_01AAAAAAAAAAAAAAAAAAAAAAAA"))
	tie2 := task(9, "Same time, higher id", withCreated(same), withID("tsk_01BBBBBBBBBBBBBBBBBBBBBBBB"))
	for _, tk := range []*queue.Task{
		task(1, "Wave two critical", withWave(2), withSeverity(queue.SeverityCritical), at(1)),
		task(2, "Wave one low", withSeverity(queue.SeverityLow), at(2)),
		task(3, "Wave one high newer", withSeverity(queue.SeverityHigh), at(10)),
		task(4, "Wave one high older", withSeverity(queue.SeverityHigh), at(5)),
		task(5, "Wave one critical", withSeverity(queue.SeverityCritical), at(20)),
		task(6, "Wave three", withWave(3), at(0)),
		task(7, "Wave one medium", at(3)),
		tie2, tie1,
		task(10, "Resolved first of all", withStatus(queue.StatusResolved), withSeverity(queue.SeverityCritical), at(0)),
	} {
		e.put(tk)
	}
	e.write("SNAG-11 - broken.md", "---\nnot: a task\n---\n")
	e.scan()

	want := []string{"SNAG-5", "SNAG-4", "SNAG-3", "SNAG-7", "SNAG-8", "SNAG-9", "SNAG-2", "SNAG-1", "SNAG-6", "tasks/SNAG-11 - broken.md"}
	if got := keys(e.list(index.Filter{Limit: 50})); !cmp.Equal(got, want) {
		t.Errorf("List order (wave, severity, created, id; broken files last):\n got %v\nwant %v", got, want)
	}
	// The same order a page at a time.
	var paged []string
	f := index.Filter{Limit: 3}
	for {
		p, err := e.db.List(e.ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, keys(p.Rows)...)
		if p.Next == "" {
			break
		}
		f.Cursor = p.Next
	}
	if !cmp.Equal(paged, want) {
		t.Errorf("List in pages of 3:\n got %v\nwant %v", paged, want)
	}
}

func TestListFilters(t *testing.T) {
	e := newEnv(t)
	for _, tk := range []*queue.Task{
		task(1, "Open wave one bug", withPlan("checkout")),
		task(2, "Claimed wave one", withStatus(queue.StatusClaimed)),
		task(3, "Inbox wave two", withStatus(queue.StatusInbox), withWave(2), withKind(queue.KindUX)),
		task(4, "Resolved wave one", withStatus(queue.StatusResolved), withPlan("checkout")),
		task(5, "Cancelled wave two", withStatus(queue.StatusCancelled), withWave(2)),
		task(6, "Open wave two ux", withWave(2), withKind(queue.KindUX), withPlan("checkout")),
		task(7, "Verifying wave three", withStatus(queue.StatusVerifying), withWave(3)),
	} {
		e.put(tk)
	}
	e.write("SNAG-8 - broken.md", "broken\n")
	e.scan()
	tests := []struct {
		name string
		f    index.Filter
		want []string
	}{
		{"default: every live status and broken files", index.Filter{}, []string{"SNAG-1", "SNAG-2", "SNAG-3", "SNAG-6", "SNAG-7", "tasks/SNAG-8 - broken.md"}},
		{"all", index.Filter{All: true}, []string{"SNAG-1", "SNAG-2", "SNAG-4", "SNAG-3", "SNAG-5", "SNAG-6", "SNAG-7", "tasks/SNAG-8 - broken.md"}},
		{"one status", index.Filter{Statuses: []queue.Status{queue.StatusOpen}}, []string{"SNAG-1", "SNAG-6"}},
		{"two statuses", index.Filter{Statuses: []queue.Status{queue.StatusInbox, queue.StatusClaimed}}, []string{"SNAG-2", "SNAG-3"}},
		{"a terminal status", index.Filter{Statuses: []queue.Status{queue.StatusResolved, queue.StatusCancelled}}, []string{"SNAG-4", "SNAG-5"}},
		{"wave", index.Filter{Wave: 2}, []string{"SNAG-3", "SNAG-6"}},
		{"wave, all", index.Filter{Wave: 2, All: true}, []string{"SNAG-3", "SNAG-5", "SNAG-6"}},
		{"kind", index.Filter{Kind: queue.KindUX}, []string{"SNAG-3", "SNAG-6"}},
		{"plan", index.Filter{Plan: "checkout"}, []string{"SNAG-1", "SNAG-6"}},
		{"plan, all", index.Filter{Plan: "checkout", All: true}, []string{"SNAG-1", "SNAG-4", "SNAG-6"}},
		{"plan and kind and status", index.Filter{Plan: "checkout", Kind: queue.KindUX, Statuses: []queue.Status{queue.StatusOpen}}, []string{"SNAG-6"}},
		{"nothing matches", index.Filter{Plan: "nope"}, nil},
		{"limit", index.Filter{Limit: 2}, []string{"SNAG-1", "SNAG-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keys(e.list(tt.f)); !cmp.Equal(got, tt.want) {
				t.Errorf("List(%+v) = %v, want %v", tt.f, got, tt.want)
			}
		})
	}
}

func TestListBlockedBy(t *testing.T) {
	e := newEnv(t)
	e.put(task(1, "Done", withStatus(queue.StatusResolved)))
	e.put(task(2, "Still open"))
	e.put(task(3, "Waits on both", withDeps("SNAG-1", "SNAG-2", "SNAG-99")))
	e.put(task(4, "Waits on the done one", withDeps("SNAG-1")))
	e.scan()
	got := map[string][]string{}
	for _, r := range e.list(index.Filter{}) {
		got[r.Key] = r.BlockedBy
	}
	want := map[string][]string{"SNAG-2": nil, "SNAG-3": {"SNAG-2", "SNAG-99"}, "SNAG-4": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BlockedBy (-want +got):\n%s", diff)
	}
}

func TestListBadCursor(t *testing.T) {
	e := newEnv(t)
	for _, c := range []string{"nope", "!!!", "bm9wZQ"} {
		_, err := e.db.List(e.ctx, index.Filter{Cursor: c})
		if err == nil || !strings.Contains(err.Error(), "bad cursor") {
			t.Errorf("List(cursor %q) = %v, want a bad cursor error", c, err)
		}
	}
}

// TestListPagesCoverEveryRowOnce pages through 500 generated tasks under
// several filters and checks that the pages, joined, are the whole list in
// queue order, each row once.
func TestListPagesCoverEveryRowOnce(t *testing.T) {
	e := newEnv(t)
	if err := taskgen.Write(e.folder, 500, 42); err != nil {
		t.Fatal(err)
	}
	e.write("SNAG-501 - broken.md", "---\n")
	e.write("SNAG-502 - broken too.md", "")
	e.rebuild()

	var all []*queue.Task
	for tk := range taskgen.Tasks(500, 42) {
		all = append(all, tk)
	}
	slices.SortFunc(all, queue.Compare)
	expect := func(keep func(*queue.Task) bool, broken bool) []string {
		var out []string
		for _, tk := range all {
			if keep(tk) {
				out = append(out, tk.Key)
			}
		}
		if broken {
			out = append(out, "tasks/SNAG-501 - broken.md", "tasks/SNAG-502 - broken too.md")
		}
		return out
	}
	tests := []struct {
		name string
		f    index.Filter
		want []string
	}{
		{"default", index.Filter{}, expect(func(tk *queue.Task) bool { return !tk.Status.Terminal() }, true)},
		{"all", index.Filter{All: true}, expect(func(*queue.Task) bool { return true }, true)},
		{"open", index.Filter{Statuses: []queue.Status{queue.StatusOpen}}, expect(func(tk *queue.Task) bool { return tk.Status == queue.StatusOpen }, false)},
		{"open or claimed", index.Filter{Statuses: []queue.Status{queue.StatusClaimed, queue.StatusOpen}}, expect(func(tk *queue.Task) bool {
			return tk.Status == queue.StatusOpen || tk.Status == queue.StatusClaimed
		}, false)},
		{"wave 2", index.Filter{Wave: 2}, expect(func(tk *queue.Task) bool { return tk.Wave == 2 && !tk.Status.Terminal() }, false)},
		{"plan", index.Filter{Plan: taskgen.Plans[0], All: true}, expect(func(tk *queue.Task) bool { return tk.Plan == taskgen.Plans[0] }, false)},
	}
	for i, tt := range tests {
		limits := []int{7, 20, 1000}
		if i < 2 {
			limits = append(limits, 1)
		}
		for _, limit := range limits {
			t.Run(fmt.Sprintf("%s/limit %d", tt.name, limit), func(t *testing.T) {
				t.Parallel()
				f := tt.f
				f.Limit = limit
				var got []string
				for pages := 0; ; pages++ {
					if pages > 600 {
						t.Fatal("paging does not end")
					}
					p, err := e.db.List(e.ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					if len(p.Rows) > limit {
						t.Fatalf("page of %d rows, limit %d", len(p.Rows), limit)
					}
					got = append(got, keys(p.Rows)...)
					if p.Next == "" {
						break
					}
					f.Cursor = p.Next
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("pages joined (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestNext(t *testing.T) {
	tests := []struct {
		name     string
		tasks    []*queue.Task
		broken   map[string]string // file name -> content
		wantKey  string
		wantWhy  string
		wantOpen int
	}{
		{
			name:    "empty queue",
			wantWhy: "nothing is ready: no task is open",
		},
		{
			name: "queue order, skipping what cannot be claimed",
			tasks: []*queue.Task{
				task(1, "Claimed, most urgent", withStatus(queue.StatusClaimed), withSeverity(queue.SeverityCritical)),
				task(2, "Inbox", withStatus(queue.StatusInbox), withSeverity(queue.SeverityCritical)),
				task(3, "Blocked", withSeverity(queue.SeverityCritical), withDeps("SNAG-1")),
				task(4, "Wave two", withWave(2), withSeverity(queue.SeverityCritical)),
				task(5, "Ready, low", withSeverity(queue.SeverityLow)),
				task(6, "Ready, high", withSeverity(queue.SeverityHigh)),
				task(7, "Ready, high, newer", withSeverity(queue.SeverityHigh)),
				task(8, "Duplicate", withSeverity(queue.SeverityCritical), withID("tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y")),
				task(9, "Duplicate too", withSeverity(queue.SeverityCritical), withID("tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y")),
			},
			broken:  map[string]string{"SNAG-10 - broken.md": "---\nstatus: open\n---\n"},
			wantKey: "SNAG-6",
		},
		{
			name: "a resolved dependency does not block",
			tasks: []*queue.Task{
				task(1, "Done", withStatus(queue.StatusResolved)),
				task(2, "Was waiting", withDeps("SNAG-1")),
			},
			wantKey: "SNAG-2",
		},
		{
			name: "a dependency by id",
			tasks: []*queue.Task{
				task(1, "Done", withStatus(queue.StatusResolved), withID("tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y")),
				task(2, "Was waiting", withDeps("tsk_01m6drjyc6cbvr9sgwxeavth3y")),
			},
			wantKey: "SNAG-2",
		},
		{
			name: "three blocked by one",
			tasks: []*queue.Task{
				task(4, "The blocker", withStatus(queue.StatusClaimed)),
				task(5, "Waits", withDeps("SNAG-4")),
				task(6, "Waits too", withDeps("SNAG-4")),
				task(7, "Waits as well", withDeps("snag-4")),
				task(8, "Done", withStatus(queue.StatusResolved)),
			},
			wantWhy:  "nothing is ready: 3 tasks are blocked by SNAG-4",
			wantOpen: 3,
		},
		{
			name: "blocked by several, most first",
			tasks: []*queue.Task{
				task(1, "Blocker one", withStatus(queue.StatusClaimed)),
				task(2, "Blocker two", withStatus(queue.StatusVerifying)),
				task(3, "Waits on one", withDeps("SNAG-1")),
				task(4, "Waits on both", withDeps("SNAG-1", "SNAG-2")),
				task(5, "Waits on a missing task", withDeps("SNAG-77")),
			},
			wantWhy:  "nothing is ready: 3 tasks are blocked by SNAG-1, SNAG-2, SNAG-77",
			wantOpen: 3,
		},
		{
			name:     "one blocked",
			tasks:    []*queue.Task{task(2, "Waits", withDeps("SNAG-1"))},
			wantWhy:  "nothing is ready: 1 task is blocked by SNAG-1",
			wantOpen: 1,
		},
		{
			name: "open but not claimable",
			tasks: []*queue.Task{
				task(1, "Duplicate", withID("tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y")),
				task(2, "Duplicate too", withID("tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y")),
			},
			wantWhy:  "nothing is ready: 2 open tasks cannot be claimed (invalid, conflicted or duplicated: snag doctor)",
			wantOpen: 2,
		},
		{
			name:    "nothing open",
			tasks:   []*queue.Task{task(1, "Claimed", withStatus(queue.StatusClaimed)), task(2, "Inbox", withStatus(queue.StatusInbox))},
			wantWhy: "nothing is ready: no task is open",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			for _, tk := range tt.tasks {
				e.put(tk)
			}
			for name, data := range tt.broken {
				e.write(name, data)
			}
			e.scan()
			row, rd, err := e.db.Next(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantKey != "" {
				if row == nil || row.Key != tt.wantKey {
					t.Fatalf("Next = %v (%s), want %s", row, rd, tt.wantKey)
				}
				if !row.Claimable() || row.Blocked() {
					t.Errorf("Next returned a row that is not claimable: %+v", row)
				}
				return
			}
			if row != nil {
				t.Fatalf("Next = %s, want nothing", row.Key)
			}
			if got := rd.String(); got != tt.wantWhy {
				t.Errorf("Readiness = %q, want %q", got, tt.wantWhy)
			}
			if rd.Open != tt.wantOpen {
				t.Errorf("Readiness.Open = %d, want %d", rd.Open, tt.wantOpen)
			}
		})
	}
}

func TestSearch(t *testing.T) { testSearch(t) }

// TestSearchBroad runs the same queries down the path for queries that
// match too many tasks to rank: every hit is still found.
func TestSearchBroad(t *testing.T) {
	defer index.SetRankLimit(0)()
	testSearch(t)
}

// TestSearchBroadPutsTitleMatchesFirst: with ranking given way, tasks whose
// title matches come before tasks that only mention the words.
func TestSearchBroadPutsTitleMatchesFirst(t *testing.T) {
	defer index.SetRankLimit(0)()
	e := newEnv(t)
	copySample(t, e)
	e.scan()
	hits, err := e.db.Search(e.ctx, "checkout", 50)
	if err != nil {
		t.Fatal(err)
	}
	inTitle := true
	for _, h := range hits {
		has := strings.Contains(strings.ToLower(h.Title), "checkout")
		if has && !inTitle {
			t.Errorf("%s (title match) comes after a task whose title does not match", h.Key)
		}
		inTitle = inTitle && has
	}
	if len(hits) < 3 || !strings.Contains(strings.ToLower(hits[0].Title), "checkout") {
		t.Errorf("hits: %v", hits)
	}
}

func testSearch(t *testing.T) {
	e := newEnv(t)
	copySample(t, e)
	e.put(task(30, "Operators in text", withBody("Keep \"quotes\" and NEAR(x) AND -minus * star in the body.\n")))
	e.scan()
	tests := []struct {
		query string
		want  string // a key among the hits; "" for no hits
	}{
		{"Safari", "SNAG-1"},                         // title word
		{"safari", "SNAG-1"},                         // any case
		{"hydrated", "SNAG-1"},                       // body word
		{"localStorage", "SNAG-1"},                   // body word in backquotes
		{"cart.items", "SNAG-1"},                     // console error text
		{"undefined is not an object", "SNAG-1"},     // console error words
		{"web/components/BasketBadge.tsx", "SNAG-4"}, // suspect file path
		{"BasketBadge", "SNAG-4"},                    // part of a path
		{"Baske", "SNAG-4"},                          // prefix
		{"chec", "SNAG-1"},                           // prefix of checkout
		{"Checkout Safari", "SNAG-1"},                // two words, both needed
		{"Bitcoin", "SNAG-14"},                       // terminal tasks too
		{"Sort order", "SNAG-19"},                    // inbox too
		{`"Safari`, "SNAG-1"},                        // unbalanced quote
		{`Safari"`, "SNAG-1"},
		{`"Safari"`, "SNAG-1"},
		{`Safari*`, "SNAG-1"},
		{`*Safari`, "SNAG-1"},
		{`Safari AND`, "SNAG-1"},
		{`AND Safari`, "SNAG-1"},
		{`Safari OR`, "SNAG-1"},
		{`NOT Safari`, "SNAG-1"}, // NOT is a word here: "Nothing" starts with it
		{`NEAR(Safari`, ""},      // NEAR is a word, not an operator
		{`NEAR(x)`, "SNAG-30"},
		{`-Safari`, "SNAG-1"},
		{`Safari -`, "SNAG-1"},
		{`title:Safari`, ""}, // no column filters: title is a word
		{`^Safari`, "SNAG-1"},
		{`(Safari)`, "SNAG-1"},
		{`{title body}: Safari`, ""},
		{`Safari + checkout`, "SNAG-1"},
		{`quotes`, "SNAG-30"},
		{`€`, ""},
		{`Price €`, "SNAG-2"},
		{`naïve café`, ""},
		{`Safari'`, "SNAG-1"},
		{`'); DROP TABLE tasks; --`, ""},
		{"zzznothing", ""},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			hits, err := e.db.Search(e.ctx, tt.query, 50)
			if err != nil {
				t.Fatalf("Search(%q): %v", tt.query, err)
			}
			var got []string
			for _, h := range hits {
				got = append(got, h.Key)
			}
			switch {
			case tt.want == "" && len(hits) > 0:
				t.Errorf("Search(%q) = %v, want no hits", tt.query, got)
			case tt.want != "" && !slices.Contains(got, tt.want):
				t.Errorf("Search(%q) = %v, want %s among them", tt.query, got, tt.want)
			}
		})
	}
	if hits, _ := e.db.Search(e.ctx, "Safari", 50); len(hits) == 0 || hits[0].Key != "SNAG-1" || !strings.Contains(hits[0].Snippet, "[Safari]") {
		t.Errorf("Search(Safari) best hit = %+v, want SNAG-1 with the word marked in its snippet", hits)
	}
	for _, q := range []string{"", "   ", `"`, `*`, `-`, `""`, `( )`, `- * "`} {
		_, err := e.db.Search(e.ctx, q, 5)
		if err == nil || !strings.Contains(err.Error(), "empty query") {
			t.Errorf("Search(%q) = %v, want the empty query error", q, err)
		}
	}
	if hits, _ := e.db.Search(e.ctx, "the", 3); len(hits) != 3 {
		t.Errorf("Search(the, limit 3) = %d hits, want 3", len(hits))
	}
}

// TestSearchRanksTitleMatchesFirst: tasks whose title holds the word come
// before tasks that only mention it, however often and wherever else (body,
// console errors, suspect files), whether the search ranks its matches or,
// matching too many to rank, gives ranking up.
func TestSearchRanksTitleMatchesFirst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rankLimit int
	}{{"ranked", 1000}, {"broad", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			defer index.SetRankLimit(tc.rankLimit)()
			e := newEnv(t)
			// The body-only ones get the lower numbers, so index order alone
			// would put them first.
			e.put(task(1, "Basket total is wrong", withBody("The wombat wombat wombat wombat page.\n")))
			e.put(task(2, "Header overlaps the menu", withBody("A wombat.\n"), withConsole("TypeError: wombat is undefined"),
				withFiles("web/wombat.ts")))
			e.put(task(3, "Footer links go nowhere", withBody("Wombat wombat, said the wombat.\n")))
			e.put(task(4, "Coupon field ignores Enter", withBody("Seen after the wombats left.\n")))
			e.put(task(5, "Wombat page is slow", withBody("It takes seconds.\n")))
			e.put(task(6, "The wombat icon is blurry", withBody("On retina screens.\n")))
			e.put(task(7, "Sort the wombats by age", withBody("Oldest first.\n")))
			e.scan()
			for _, q := range []string{"wombat", "womb", "WOMBAT"} {
				hits, err := e.db.Search(e.ctx, q, 50)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, h := range hits {
					got = append(got, h.Key)
				}
				if len(got) != 7 {
					t.Fatalf("Search(%q) = %v, want all 7 tasks", q, got)
				}
				title, body := got[:3], got[3:]
				slices.Sort(title)
				slices.Sort(body)
				if diff := cmp.Diff([]string{"SNAG-5", "SNAG-6", "SNAG-7"}, title); diff != "" {
					t.Errorf("Search(%q) = %v: the first three are not the title matches (-want +got):\n%s", q, got, diff)
				}
				if diff := cmp.Diff([]string{"SNAG-1", "SNAG-2", "SNAG-3", "SNAG-4"}, body); diff != "" {
					t.Errorf("Search(%q) = %v: the body matches are not last (-want +got):\n%s", q, got, diff)
				}
			}
		})
	}
}

// TestSearchPrefixesTheLastWord: the last word of a search matches as a
// prefix (it may be half typed); the words before it match whole.
func TestSearchPrefixesTheLastWord(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rankLimit int
	}{{"ranked", 1000}, {"broad", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			defer index.SetRankLimit(tc.rankLimit)()
			e := newEnv(t)
			copySample(t, e)
			e.scan()
			for _, tt := range []struct {
				query string
				found bool // SNAG-1 (Checkout button does nothing on Safari) among the hits
			}{
				{"chec", true},
				{"checkout safa", true},
				{"safari chec", true},
				{"Safari Checkout", true},
				{"chec safari", false},      // chec is not a word of SNAG-1
				{"checko safari", false},    // nor checko
				{"checkout safarix", false}, // the prefix is all of the last word
			} {
				hits, err := e.db.Search(e.ctx, tt.query, 50)
				if err != nil {
					t.Fatal(err)
				}
				found := slices.ContainsFunc(hits, func(h index.Hit) bool { return h.Key == "SNAG-1" })
				if found != tt.found {
					t.Errorf("Search(%q) finds SNAG-1: %v, want %v", tt.query, found, tt.found)
				}
			}
			// The last token of a path is the prefix; the ones before it are
			// whole words of the path.
			for _, tt := range []struct {
				query string
				found bool
			}{
				{"web/components/Basket", true},
				{"BasketBadge.ts", true},
				{"web/comp BasketBadge", false},
			} {
				hits, err := e.db.Search(e.ctx, tt.query, 50)
				if err != nil {
					t.Fatal(err)
				}
				found := slices.ContainsFunc(hits, func(h index.Hit) bool { return h.Key == "SNAG-4" })
				if found != tt.found {
					t.Errorf("Search(%q) finds SNAG-4: %v, want %v", tt.query, found, tt.found)
				}
			}
		})
	}
}

// TestSearchSpellsOutThePrefix: the last word's prefix, spelled out as the
// words of the index it covers, matches exactly the rows FTS5's own prefix
// query does; a prefix of more words than it is spelled out as, or a word
// outside ASCII, is left to FTS5.
func TestSearchSpellsOutThePrefix(t *testing.T) {
	e := newEnv(t)
	copySample(t, e)
	var many []string
	for i := range index.MaxPrefixTerms + 1 {
		many = append(many, fmt.Sprintf("zq%03d", i))
	}
	e.put(task(40, "Many words", withBody(strings.Join(many, " ")+"\n")))
	e.put(task(41, "Café au lait", withBody("Straße naïve façade.\n")))
	e.scan()
	conn := e.conn()
	rows := func(match string) []int64 {
		var ns []int64
		if match == "" {
			return ns
		}
		for _, r := range query(t, conn, `SELECT rowid FROM tasks_fts WHERE tasks_fts MATCH ? ORDER BY rowid`, match) {
			ns = append(ns, r["rowid"].(int64))
		}
		return ns
	}
	for _, tt := range []struct {
		query    string
		spelled  bool // the prefix is spelled out (no FTS5 prefix query)
		wantRows bool
	}{
		{"chec", true, true},
		{"sa", true, true},
		{"checkout sa", true, true},
		{"Safari t", true, true},
		{"web/components/Bas", true, true},
		{"BasketBadge.", true, true},
		{"Baske", true, true},
		{"cart.it", true, true},
		{"zq00", true, true},
		{"zq", false, true},     // more words than it is spelled out as
		{"caf", true, true},     // café is cafe in the index
		{"straß", false, true},  // outside ASCII
		{"€ chec", false, true}, // € is no word: checkout AND (...) would match nothing
		{"Price €", false, true},
		{"zzznothing", true, false},
		{"checkout zzz", true, false},
	} {
		t.Run(tt.query, func(t *testing.T) {
			match, err := index.FTSMatch(e.ctx, e.db, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			if spelled := !strings.Contains(match, "*"); spelled != tt.spelled {
				t.Errorf("FTSMatch(%q) = %s, want the prefix spelled out: %v", tt.query, match, tt.spelled)
			}
			got, want := rows(match), rows(index.FTSQuery(tt.query))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FTSMatch(%q) = %s matches other rows than %s (-want +got):\n%s", tt.query, match, index.FTSQuery(tt.query), diff)
			}
			if (len(got) > 0) != tt.wantRows {
				t.Errorf("FTSMatch(%q) matches %d rows, want some: %v", tt.query, len(got), tt.wantRows)
			}
		})
	}
}

func TestNextKey(t *testing.T) {
	e := newEnv(t)
	e.put(task(4, "Four"))
	e.write("SNAG-12 - broken.md", "---\n") // never parsed: holds 12 by its name
	e.write("SNAG-9 - also broken.md", "no frontmatter\n")
	e.scan()
	var got []int
	for range 3 {
		n, err := e.db.NextKey(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	if want := []int{13, 14, 15}; !cmp.Equal(got, want) {
		t.Errorf("NextKey = %v, want %v (above SNAG-12, which never parsed)", got, want)
	}
	// A file with a higher key appears: the next key goes above it.
	e.put(task(40, "Forty"))
	e.scan()
	if n, _ := e.db.NextKey(e.ctx); n != 41 {
		t.Errorf("NextKey after SNAG-40 = %d, want 41", n)
	}
	// Reservations survive the files going away and a rebuild.
	e.remove(queue.FileName("SNAG-40", "Forty"))
	e.rebuild()
	if n, _ := e.db.NextKey(e.ctx); n != 42 {
		t.Errorf("NextKey after a rebuild without SNAG-40 = %d, want 42", n)
	}
}

func TestNextKeyConcurrent(t *testing.T) {
	e := newEnv(t)
	e.put(task(100, "Hundred"))
	e.scan()
	const workers, each = 8, 25
	var (
		mu   sync.Mutex
		all  []int
		errs []error
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			prev := 0
			for range each {
				n, err := e.db.NextKey(e.ctx)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				if n <= prev {
					errs = append(errs, fmt.Errorf("NextKey went from %d to %d in one goroutine", prev, n))
				}
				all = append(all, n)
				mu.Unlock()
				prev = n
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	slices.Sort(all)
	want := make([]int, workers*each)
	for i := range want {
		want[i] = 101 + i
	}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("keys handed out (-want +got):\n%s", diff)
	}
}

// liveTables are the tables no rebuild may touch.
var liveTables = []string{"sessions", "leases", "epochs", "file_claims", "messages", "audit", "meta"}

func TestRebuildLeavesLiveStateAlone(t *testing.T) {
	e := newEnv(t)
	copySample(t, e)
	e.scan()
	if _, err := e.db.NextKey(e.ctx); err != nil { // writes meta
		t.Fatal(err)
	}
	conn := e.conn()
	exec(t, conn, `INSERT INTO sessions (id, name, client, pid, started, last_seen) VALUES (1, 'VESPER', 'claude-code', 4242, 100, 200)`)
	exec(t, conn, `INSERT INTO sessions (id, name, started, last_seen, ended, end_reason) VALUES (2, 'ORION', 100, 300, 400, 'gone')`)
	exec(t, conn, `INSERT INTO leases (task_id, session_id, holder, epoch, acquired) VALUES ('tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y', 1, 'VESPER', 7, 150)`)
	exec(t, conn, `INSERT INTO leases (task_id, session_id, holder, epoch, acquired, ended, end_reason) VALUES ('tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y', 2, 'ORION', 6, 110, 140, 'released')`)
	exec(t, conn, `INSERT INTO epochs (task_id, epoch) VALUES ('tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y', 7)`)
	exec(t, conn, `INSERT INTO file_claims (path, session_id, task_id, acquired, expires) VALUES ('web/checkout.ts', 1, 'tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y', 150, 1050)`)
	exec(t, conn, `INSERT INTO messages (created, from_session, to_name, kind, body) VALUES (160, 1, 'ORION', 'handoff', 'over to you')`)
	exec(t, conn, `INSERT INTO meta (k, v) VALUES ('schema_note', 'kept')`)
	if err := e.db.Audit(e.ctx, snag.AuditEntry{Actor: queue.Person, Action: "claim", TaskID: "tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	dump := func() map[string][]record {
		out := map[string][]record{}
		for _, tbl := range liveTables {
			out[tbl] = query(t, conn, `SELECT * FROM `+tbl+` ORDER BY 1`)
		}
		return out
	}
	before := dump()
	for _, tbl := range liveTables {
		if len(before[tbl]) == 0 {
			t.Fatalf("set-up left %s empty", tbl)
		}
	}
	e.write("SNAG-50 - broken.md", "---\n")
	if st := e.rebuild(); st.Files != 21 {
		t.Errorf("Rebuild saw %d files, want 21", st.Files)
	}
	if diff := cmp.Diff(before, dump()); diff != "" {
		t.Errorf("Rebuild changed live state (-before +after):\n%s", diff)
	}
	if c, _ := e.db.Count(e.ctx); c.Tasks != 21 || c.Problems != 1 {
		t.Errorf("Count after Rebuild = %+v, want 21 tasks, 1 problem", c)
	}
}

// TestRebuildIsAtomic checks that a reader never sees the index emptied
// half way through a rebuild.
func TestRebuildIsAtomic(t *testing.T) {
	e := newEnv(t)
	if err := taskgen.Write(e.folder, 150, 5); err != nil {
		t.Fatal(err)
	}
	e.scan()
	other := openDB(t, e.dbPath)
	done := make(chan struct{})
	var seen []int
	go func() {
		defer close(done)
		for range 3 {
			e.rebuild()
		}
	}()
	for {
		select {
		case <-done:
			bad := 0
			for _, n := range seen {
				if n != 150 {
					bad++
				}
			}
			if bad > 0 {
				t.Fatalf("in %d of %d looks during a rebuild a reader saw other than 150 rows", bad, len(seen))
			}
			return
		default:
		}
		c, err := other.Count(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, c.Tasks)
	}
}

func TestOpenRefusesAForeignFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	conn := rawConn(t, path)
	exec(t, conn, `PRAGMA application_id = 1234`)
	exec(t, conn, `CREATE TABLE x (y)`)
	conn.Close()
	db, err := index.Open(t.Context(), path)
	if err == nil {
		db.Close()
		t.Fatal("Open of another application's database succeeded")
	}
}
