// Package taskgen writes realistic task files for tests and benchmarks: a
// queue of any size whose statuses, severities, kinds, waves, dependencies,
// suspect files, captures and bodies look like the ones people and agents
// write, the same every time for the same seed.
//
// Files are rendered by [codec.Format] and named by [queue.FileName], so
// every generated file parses. taskgen imports queue; nothing of snag's
// production code imports taskgen.
package taskgen

import (
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// Epoch is the creation time of the first generated task; each later task
// is created a few minutes after the one before it.
var Epoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// Words is the vocabulary of titles and bodies, most frequent first: word i
// is drawn with a probability that falls with i (a Zipf law), so Words[0]
// is in every body and the last word in about one in seven.
var Words = strings.Fields(`
	the page button when after click checkout basket user error shows load
	product price order form mobile search safari list total cart image
	screen empty slow request server cache header footer modal menu filter
	sort login session email address payment coupon shipping discount
	stock variant gallery review rating wishlist account profile password
	reset token cookie redirect timeout retry spinner toast banner tooltip
	dropdown checkbox input label focus keyboard scroll overflow layout grid
	column row width height font color contrast icon badge count quantity
	stepper currency rounding tax invoice receipt refund return delivery
	tracking warehouse courier postcode country locale translation date
	timezone calendar picker upload avatar thumbnail lazy prefetch bundle
	chunk hydration render state store reducer effect hook context provider
	router route query param fetch response status json schema
	validation message aria role announce reader zoom
	tablet desktop landscape portrait viewport breakpoint animation
	transition flicker jank paint shift memory leak worker socket
	stream queue job cron webhook signature nonce csrf cors origin proxy
	gateway latency throughput index migration constraint deadlock
	transaction rollback replica backup restore export import csv report
	dashboard chart metric alert threshold regression flaky test fixture
	snapshot coverage lint build deploy release canary feature
	flag experiment cohort analytics event consent
	privacy gdpr retention audit permission admin invite team billing
	plan subscription trial renewal dunning proration seat quota limit
`)

// RareWords are words that appear in about one task in 50,000 each: a
// search for one of them has a handful of hits at most.
var RareWords = []string{
	"quokka", "marzipan", "zeppelin", "obsidian", "tamarind", "kestrel",
	"halibut", "sassafras", "vermilion", "axolotl", "chrysalis", "nebula",
	"pangolin", "quasar", "tourmaline", "wombat",
}

// Agents are the names claimed tasks are assigned to.
var Agents = []string{"VESPER", "ORION", "LYRA", "CASSIO", "MIRA", "DANA", "SOL", "KAI"}

// Plans are the plan slugs tasks belong to (most tasks belong to none).
var Plans = []string{"checkout-revamp", "search-speedup", "a11y-audit", "mobile-polish"}

var sourceFiles = []string{
	"web/checkout.ts", "web/cart/store.ts", "web/cart/total.ts", "web/components/BasketBadge.tsx",
	"web/components/Gallery.tsx", "web/components/Stepper.tsx", "web/components/Footer.tsx",
	"web/search/suggest.ts", "web/search/results.tsx", "web/auth/login.tsx", "web/auth/session.ts",
	"web/i18n/currency.ts", "web/layout/grid.css", "web/layout/header.css", "server/orders/confirm.go",
	"server/orders/email.go", "server/search/index.go", "server/search/rank.go", "server/shipping/cost.go",
	"server/payments/stripe.go", "server/catalog/images.go", "server/auth/cookie.go", "server/api/router.go",
	"db/migrations/0042_orders.sql", "db/queries/search.sql", "Makefile", "vite.config.ts",
}

var consoleErrors = []string{
	"TypeError: Cannot read properties of undefined (reading 'items') (checkout.ts:131)",
	"TypeError: undefined is not an object (evaluating 'cart.total')",
	"Uncaught ReferenceError: gtag is not defined",
	"Failed to load resource: the server responded with a status of 500 (Internal Server Error)",
	"Failed to load resource: net::ERR_BLOCKED_BY_CLIENT",
	"Warning: Each child in a list should have a unique \"key\" prop.",
	"Uncaught (in promise) DOMException: The user aborted a request.",
	"Hydration failed because the initial UI does not match what was rendered on the server.",
	"SyntaxError: Unexpected token '<', \"<!DOCTYPE \"... is not valid JSON",
	"Refused to apply style from '/assets/app.css' because its MIME type ('text/html') is not a supported stylesheet MIME type",
	"RangeError: Maximum call stack size exceeded",
	"Access to fetch at 'https://api.example.test/cart' from origin 'http://localhost:3000' has been blocked by CORS policy",
}

var anchors = []string{
	"#checkout-form button[type=submit]", ".basket-badge", "#coupon-input", ".gallery img:first-child",
	"nav .menu-toggle", "#search-box", ".product-card .price", "footer .place-order",
}

var pages = []string{"checkout", "basket", "product/42", "search?q=shoes", "account", "category/boots", "login"}

var titleShapes = []string{
	"%s %s does nothing on %s",
	"%s shows the wrong %s after %s",
	"%s %s is slow on %s",
	"%s %s overflows the %s",
	"Move %s %s into its own %s",
	"%s %s is not announced by screen readers",
	"Add %s to the %s %s",
	"%s %s resets after %s",
}

// weighted picks from values with the given weights (which need not sum to 1).
func weighted[T any](r *rand.Rand, values []T, weights []float64) T {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	x := r.Float64() * total
	for i, w := range weights {
		if x < w {
			return values[i]
		}
		x -= w
	}
	return values[len(values)-1]
}

var (
	statusWeights   = []float64{10, 55, 10, 3, 2, 15, 5} // in the order of queue.Statuses
	severityWeights = []float64{5, 25, 45, 25}
	kindWeights     = []float64{35, 12, 8, 8, 7, 15, 10, 5}
	waveWeights     = []float64{30, 25, 20, 15, 10}
)

// gen holds the random state of one generated queue.
type gen struct {
	r    *rand.Rand
	zipf *rand.Zipf
	ids  *rand.ChaCha8
}

func newGen(seed int64) *gen {
	var s [32]byte
	for i := range 4 {
		v := uint64(seed) + uint64(i)*0x9E3779B97F4A7C15
		for j := range 8 {
			s[i*8+j] = byte(v >> (8 * j))
		}
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x736e6167))
	return &gen{r: r, zipf: rand.NewZipf(r, 1.1, 2, uint64(len(Words)-1)), ids: rand.NewChaCha8(s)}
}

func (g *gen) word() string { return Words[g.zipf.Uint64()] }

func (g *gen) pick(list []string) string { return list[g.r.IntN(len(list))] }

// sentence is a run of words that reads like a bug report at a glance.
func (g *gen) sentence() string {
	n := 6 + g.r.IntN(12)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = g.word()
	}
	s := strings.Join(ws, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func (g *gen) paragraph() string {
	n := 2 + g.r.IntN(5)
	ss := make([]string, n)
	for i := range ss {
		ss[i] = g.sentence()
	}
	return strings.Join(ss, " ")
}

// body is markdown of a few hundred bytes to a few KB.
func (g *gen) body(t *queue.Task) []byte {
	var b strings.Builder
	b.WriteString(g.paragraph())
	if g.r.IntN(50_000/len(RareWords)) == 0 { // each rare word in about one task in 50,000
		fmt.Fprintf(&b, " Seen first on the %s build.", g.pick(RareWords))
	}
	b.WriteString("\n\n")
	if t.Kind != queue.KindBug {
		b.WriteString(g.paragraph())
		b.WriteString("\n\n")
	}
	if t.Kind == queue.KindBug || g.r.IntN(3) == 0 {
		b.WriteString("## Steps to reproduce\n\n")
		for i := range 2 + g.r.IntN(4) {
			fmt.Fprintf(&b, "%d. %s\n", i+1, g.sentence())
		}
		b.WriteString("\n## Expected\n\n")
		b.WriteString(g.sentence())
		b.WriteString("\n\n## Actual\n\n")
		b.WriteString(g.paragraph())
		b.WriteString("\n")
	}
	for range g.r.IntN(4) {
		b.WriteString("\n")
		b.WriteString(g.paragraph())
		b.WriteString("\n")
	}
	if len(t.SuspectFiles) > 0 && g.r.IntN(2) == 0 {
		fmt.Fprintf(&b, "\nProbably in `%s`; %s\n", t.SuspectFiles[0].Path, strings.ToLower(g.sentence()))
	}
	if t.Capture != nil && len(t.Capture.ConsoleErrors) > 0 {
		fmt.Fprintf(&b, "\nThe console says:\n\n```\n%s\n```\n", strings.Join(t.Capture.ConsoleErrors, "\n"))
	}
	return []byte(b.String())
}

func (g *gen) title() string {
	shape := g.pick(titleShapes)
	args := []any{g.word(), g.word(), g.word()}
	s := fmt.Sprintf(shape, args[:strings.Count(shape, "%s")]...)
	return strings.ToUpper(s[:1]) + s[1:]
}

// task makes task number i (from 1) of a queue.
func (g *gen) task(i int) *queue.Task {
	created := Epoch.Add(time.Duration(i)*7*time.Minute + time.Duration(g.r.IntN(300))*time.Second)
	t := &queue.Task{
		ID:       queue.IDPrefix + ulid.MustNew(ulid.Timestamp(created), g.ids).String(),
		Key:      queue.Alias(i),
		Title:    g.title(),
		Status:   weighted(g.r, queue.Statuses, statusWeights),
		Trust:    queue.TrustVetted,
		Severity: weighted(g.r, queue.Severities, severityWeights),
		Kind:     weighted(g.r, queue.Kinds, kindWeights),
		Wave:     weighted(g.r, []int{1, 2, 3, 4, 5}, waveWeights),
		Created:  created,
		Updated:  created.Add(time.Duration(g.r.IntN(72*60)) * time.Minute),
	}
	switch t.Status {
	case queue.StatusInbox:
		t.Trust = queue.TrustUnvetted
	case queue.StatusClaimed, queue.StatusVerifying:
		t.Assignee = g.pick(Agents)
	case queue.StatusResolved:
		t.Verified = g.r.IntN(4) != 0
	}
	if g.r.IntN(5) < 2 {
		t.Plan = g.pick(Plans)
	}
	if i > 1 && g.r.IntN(10) == 0 { // ~10% depend on one or two earlier tasks
		for range 1 + g.r.IntN(2) {
			dep := queue.Alias(1 + g.r.IntN(i-1))
			if !slices.Contains(t.DependsOn, dep) {
				t.DependsOn = append(t.DependsOn, dep)
			}
		}
	}
	for range g.r.IntN(4) {
		f := queue.FileRef{Path: g.pick(sourceFiles)}
		if g.r.IntN(3) != 0 {
			a := 1 + g.r.IntN(400)
			f.Lines = [2]int{a, a + g.r.IntN(40)}
		}
		t.SuspectFiles = append(t.SuspectFiles, f)
	}
	if g.r.IntN(5) == 0 { // ~20% came from a capture
		c := &queue.Capture{
			URL:    "http://localhost:3000/" + g.pick(pages),
			Anchor: g.pick(anchors),
		}
		for range 1 + g.r.IntN(2) {
			c.ConsoleErrors = append(c.ConsoleErrors, g.pick(consoleErrors))
		}
		for k := range g.r.IntN(3) {
			c.Screenshots = append(c.Screenshots, fmt.Sprintf("shots/%s-%d.png", t.Key, k))
		}
		t.Capture = c
	}
	t.Body = g.body(t)
	return t
}

// Tasks yields n generated tasks, SNAG-1 to SNAG-n, the same ones for the
// same seed. About 55% are open, 15% resolved, 10% each claimed and inbox,
// the rest cancelled, verifying or needs_review; waves run from 1 to 5;
// about 10% depend on earlier tasks, 20% carry a capture with console
// errors, and most suspect a file or two. Bodies are markdown from a few
// hundred bytes to a few KB.
func Tasks(n int, seed int64) iter.Seq[*queue.Task] {
	return func(yield func(*queue.Task) bool) {
		g := newGen(seed)
		for i := 1; i <= n; i++ {
			if !yield(g.task(i)) {
				return
			}
		}
	}
}

// Write writes n generated task files (see [Tasks]) into dir, creating the
// folder when it is missing. It never overwrites a file: a name that exists
// fails with an error wrapping [fs.ErrExist]. Files are written in
// parallel, without fsync: they are for tests, not for keeping.
func Write(dir string, n int, seed int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("taskgen: %w", err)
	}
	type file struct {
		name string
		data []byte
	}
	files := make(chan file, 256)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for f := range files {
				if err := create(filepath.Join(dir, f.name), f.data); err != nil {
					mu.Lock()
					if len(errs) < 5 {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for t := range Tasks(n, seed) {
		files <- file{queue.FileName(t.Key, t.Title), codec.Format(t)}
	}
	close(files)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("taskgen: %w", errors.Join(errs...))
	}
	return nil
}

func create(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("write %s: %w: taskgen never overwrites a file; write into an empty folder", path, err)
		}
		return err
	}
	_, werr := f.Write(data)
	return errors.Join(werr, f.Close())
}

// HostileTitles are TESTPLAN X7's titles, for tests: traversal, reserved device names, NUL,
// length, bidi overrides, emoji, decomposed text and control characters.
var HostileTitles = []struct {
	Name, Title string
}{
	{"dot-dot slash", "../../../etc/passwd"},
	{"dot-dot backslash", `..\..\Windows\System32\config`},
	{"absolute", "/etc/passwd"},
	{"only dots", ".."},
	{"leading dots", "...hidden"},
	{"CON", "CON"},
	{"nul", "nul"},
	{"COM1.txt", "COM1.txt"},
	{"NUL byte", "a\x00b\x00../c"},
	{"10,000 characters", strings.Repeat("é", 10000)},
	{"10,000 bytes of x", strings.Repeat("x", 10000)},
	{"RTL override", "invoice \u202egnp.exe"},
	{"bidi isolates and marks", "\u2066a\u2069\u200e\u200f\u061c"},
	{"emoji", "🛒🔥 checkout 👩‍💻🇩🇪"},
	{"emoji cut at the limit", strings.Repeat("a", 78) + "👩‍💻"},
	{"NFD", "Cafe\u0301 re\u0301sume\u0301"},
	{"control characters", "a\tb\nc\rd\x1be\x7ff\u0085g\u009b"},
	{"reserved characters", `a/b\c:d*e?f"g<h>i|j`},
	{"percent-encoded traversal", "%2e%2e%2f%2e%2e%2fetc%2fpasswd"},
	{"trailing dots and spaces", "title. . .  "},
	{"unicode spaces", "a\u00a0\u2028\u2029\u3000b"},
	{"empty", ""},
	{"only spaces", "   "},
	{"only reserved", `/\:*?"<>|`},
	{"invalid UTF-8", "caf\xe9 \xff\xfe"},
	{"dot md", ".md"},
	{"replacement character", "a\uFFFDb"},
}
