package daemon_test

import (
	"encoding/json"
	"fmt"
	"image"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/pixdiff"
)

// visualPages serves the checkout page of TestVisualVerify in the state
// each test task's page is in: "bug" (the layout bug as captured), "fixed"
// (the button moved clear and restyled), "gone" (the element removed) and
// "nudged" (the button's label moved by 0.4 px: anti-aliasing alone).
type visualPages struct {
	mu    sync.Mutex
	state map[string]string // page -> state
}

func (p *visualPages) set(page, state string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state[page] = state
}

func (p *visualPages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	state := p.state[strings.TrimPrefix(r.URL.Path, "/")]
	p.mu.Unlock()
	button := `<button id="pay" style="position:absolute; left:40px; top:60px; width:160px; height:44px; margin-left:-30px;
		background:#c00; color:#fff; font:bold 20px sans-serif; border:0; padding:0 0 0 8px; text-align:left">Pay now</button>`
	switch state {
	case "fixed":
		button = strings.NewReplacer("margin-left:-30px", "margin-left:0", "#c00", "#0a5").Replace(button)
	case "gone":
		button = `<p>Sold out.</p>`
	case "nudged":
		button = strings.Replace(button, "padding:0 0 0 8px", "padding:0 0 0 8.4px", 1)
	}
	fmt.Fprintf(w, `<!doctype html><title>Checkout</title><body style="margin:0">
<div id="total" style="position:absolute; left:0; top:60px; width:60px; height:44px; background:#ddd">$42</div>%s</body>`, button)
}

// snagCapture runs snag capture as a person does, through snagd's program
// (the snag program runs it for the browser), in root.
func snagCapture(t *testing.T, d *daemon, args ...string) string {
	t.Helper()
	cmd := exec.Command(snagdBin, append([]string{"snag", "capture"}, args...)...)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), "SNAG_HOME="+d.home, "SNAG_NO_AUTOSTART=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("snag capture %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("snag capture: %s", strings.TrimSpace(stderr.String()))
	return strings.TrimSpace(string(out))
}

// TestVisualVerify (issue 18): tasks captured with snag capture, the
// element named, are checked by their pixels. The layout bug fixed (the
// element changed) goes to needs_review with before, after and diff; not
// fixed (the same pixels) fails, back to its agent; the element's label
// moved by less than a pixel is anti-aliasing alone and fails too; the
// element gone is said in the reason. The changed fraction is in GET
// /verify and its run.
func TestVisualVerify(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	pages := &visualPages{state: map[string]string{"a": "bug", "b": "bug", "c": "bug", "d": "bug"}}
	srv := httptest.NewServer(pages)
	defer srv.Close()
	root, home := verifyProject(t, `{"version": 1, "claim": {"max_per_session": 0}, "browser": {"allowed_hosts": ["127.0.0.1"]}}`)
	d := startDaemon(t, root, home)
	keys := map[string]string{}
	for _, page := range []string{"a", "b", "c", "d"} {
		keys[page] = snagCapture(t, d, srv.URL+"/"+page, "--anchor", "#pay", "--kind", "layout",
			"--viewport", "400x300", "--note", "The pay button covers the total")
		if code := d.do("POST", "/tasks/"+keys[page]+"/promote", map[string]any{"by": "ana"}, nil); code != http.StatusOK {
			t.Fatalf("promote %s: %d", keys[page], code)
		}
	}
	pages.set("a", "fixed")
	pages.set("c", "gone")
	pages.set("d", "nudged")
	a := startAgent(t, d, "")
	for _, page := range []string{"a", "b", "c", "d"} {
		_, epoch := a.claim(keys[page])
		if code, out := a.resolveAs(keys[page], epoch); code != http.StatusAccepted {
			t.Fatalf("resolve %s: %d %v", keys[page], code, out)
		}
	}
	for _, c := range []struct {
		page, outcome, status, reason string
		changed                       bool // a comparison ran and found a change
		compared                      bool
	}{
		{"a", "inconclusive", "needs_review", "a person compares before, after and diff", true, true},
		{"b", "fail", "claimed", "looks exactly as it did when captured", false, true},
		{"c", "inconclusive", "needs_review", "is not on the page any more", false, false},
		{"d", "fail", "claimed", "looks exactly as it did when captured", false, true},
	} {
		key := keys[c.page]
		v := d.waitVerify(key)
		if v.Outcome != c.outcome || v.Status != c.status || !strings.Contains(v.Reason, c.reason) {
			t.Errorf("%s (%s): %s, %s: %q; want %s, %s, with %q", key, c.page, v.Outcome, v.Status, v.Reason, c.outcome, c.status, c.reason)
			continue
		}
		if !c.compared {
			if v.Visual != nil {
				t.Errorf("%s: a comparison %+v, want none", key, v.Visual)
			}
			continue
		}
		if v.Visual == nil {
			t.Errorf("%s: no visual comparison in GET /verify", key)
			continue
		}
		vis := *v.Visual
		if vis.Identical == c.changed || (vis.Changed > 0.001) != c.changed {
			t.Errorf("%s: changed %.4f, identical %v; want changed %v", key, vis.Changed, vis.Identical, c.changed)
		}
		for _, pic := range []string{vis.Before, vis.After, vis.Diff} {
			f, err := os.Open(filepath.Join(root, ".snag", pic))
			if err != nil {
				t.Errorf("%s: picture %q: %v", key, pic, err)
				continue
			}
			img, err := pixdiff.DecodePNG(f, 0)
			f.Close()
			// The crops are 160 by 44 CSS pixels, at scale 1.
			if err != nil || img.Bounds().Dx() != 160 || img.Bounds().Dy() != 44 {
				t.Errorf("%s: picture %s: %v, %v; want 160x44", key, pic, err, img)
			}
		}
		if !strings.Contains(v.Reason, "changed since the capture") {
			t.Errorf("%s: reason %q does not give the figure", key, v.Reason)
		}
		if c.page == "d" && samePixels(t, filepath.Join(root, ".snag", vis.Before), filepath.Join(root, ".snag", vis.After)) {
			t.Errorf("%s: the label moved by 0.4 px changed no pixel: the case shows nothing of anti-aliasing", key)
		}
	}
	if t.Failed() {
		return
	}
	// An agent's snag_get names the figure, links before, after and diff,
	// and says which picture snag_screenshot shows the diff at.
	br, err := startDrainBridge(snagdBin, d.root, d.home)
	if err != nil {
		t.Fatal(err)
	}
	defer br.close()
	got, err := br.tool("snag_get", map[string]any{"id": keys["a"]})
	if err != nil || got.isError {
		t.Fatalf("snag_get: %v %s", err, got.text)
	}
	var out struct {
		Verify      struct{ Changed *float64 }
		NextActions []string `json:"next_actions"`
	}
	json.Unmarshal(got.structure, &out)
	var shot string
	for _, n := range out.NextActions {
		if strings.HasPrefix(n, "snag_screenshot") && strings.Contains(n, "what verify saw change") {
			shot = n
		}
	}
	if out.Verify.Changed == nil || *out.Verify.Changed <= 0.001 || shot == "" {
		t.Fatalf("snag_get's verify block %s and next actions %q: want the figure and the diff's snag_screenshot", got.structure, out.NextActions)
	}
	var args struct {
		ID    string
		Index int
	}
	json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(shot, "snag_screenshot "), " shows what verify saw change")), &args)
	pic, err := br.tool("snag_screenshot", map[string]any{"id": args.ID, "index": args.Index})
	if err != nil || pic.isError || !strings.HasPrefix(pic.text, "diff") || !strings.Contains(pic.text, "-diff.png") {
		t.Errorf("snag_screenshot %+v: %v %q; want the diff", args, err, pic.text)
	}
	// The run itself carries the figure, for the history.
	var st struct {
		History []api.VerifyRun
	}
	d.get("/verify/"+keys["a"], &st)
	if len(st.History) == 0 || st.History[0].Visual == nil || st.History[0].Visual.Changed <= 0.001 {
		t.Errorf("the run's history lacks the figure: %+v", st.History)
	}
}

// samePixels says whether two PNGs have the same pixels.
func samePixels(t *testing.T, a, b string) bool {
	t.Helper()
	var imgs [2]image.Image
	for i, p := range []string{a, b} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		imgs[i], err = pixdiff.DecodePNG(f, 0)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if imgs[0].Bounds() != imgs[1].Bounds() {
		return false
	}
	r := imgs[0].Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if imgs[0].At(x, y) != imgs[1].At(x, y) {
				return false
			}
		}
	}
	return true
}

// snagCaptureFails runs snag capture expecting it to fail, and returns
// what it said.
func snagCaptureFails(t *testing.T, d *daemon, args ...string) string {
	t.Helper()
	cmd := exec.Command(snagdBin, append([]string{"snag", "capture"}, args...)...)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), "SNAG_HOME="+d.home, "SNAG_NO_AUTOSTART=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("snag capture %s succeeded: %s", strings.Join(args, " "), out)
	}
	return string(out)
}

// TestSnagCapture (issue 18): snag capture as a person runs it, against
// pages the test serves. A console error, an uncaught exception and a
// failed request are in the inbox task. A host not on
// browser.allowed_hosts is refused before any request reaches it, unless
// --allow-host widens the list; a redirect off the list is refused; a page
// that never settles is a clear error naming --wait-for; nothing is added
// by a refused capture.
func TestSnagCapture(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	var mu sync.Mutex
	hits := map[string]int{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/broken":
			fmt.Fprint(w, `<!doctype html><title>Cart</title><main id="cart"><h1>Cart</h1><button>Remove</button></main>
<script>console.error("cart is undefined"); fetch("/api/cart"); setTimeout(() => { throw new Error("boom") }, 0)</script>`)
		case "/api/cart":
			http.Error(w, "no", http.StatusInternalServerError)
		case "/away":
			http.Redirect(w, r, "http://localhost:"+strings.Split(r.Host, ":")[1]+"/broken", http.StatusFound)
		case "/busy":
			fmt.Fprint(w, `<!doctype html><title>Busy</title><p id="p">Loading</p><script>fetch("/hang")</script>`)
		case "/hang":
			<-r.Context().Done()
		case "/favicon.ico":
			http.NotFound(w, r)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	root, home := verifyProject(t, `{"version": 1, "browser": {"allowed_hosts": ["127.0.0.1"]}}`)
	d := startDaemon(t, root, home)

	key := snagCapture(t, d, srv.URL+"/broken", "--anchor-text", "Remove", "--note", "Remove does nothing")
	var shown api.TaskDetail
	if code := d.get("/tasks/"+key, &shown); code != http.StatusOK || shown.Task == nil || shown.Task.Capture == nil {
		t.Fatalf("GET /tasks/%s: %d", key, code)
	}
	c := shown.Task.Capture
	joined := strings.Join(c.ConsoleErrors, "\n")
	if !strings.Contains(joined, "cart is undefined") || !strings.Contains(joined, "boom") ||
		len(c.NetworkErrors) != 1 || !strings.HasPrefix(c.NetworkErrors[0], "500 GET ") || !strings.HasSuffix(c.NetworkErrors[0], "/api/cart") {
		t.Errorf("console %q, network %q", c.ConsoleErrors, c.NetworkErrors)
	}
	if c.Anchor == "" || c.AnchorText != "Remove" || c.AnchorBox == nil || c.Crop == "" {
		t.Errorf("anchor %q %q %+v crop %q", c.Anchor, c.AnchorText, c.AnchorBox, c.Crop)
	}

	before := shotsAndTasks(t, root)
	local := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	mu.Lock()
	hits["/broken"] = 0
	mu.Unlock()
	if out := snagCaptureFails(t, d, local+"/broken"); !strings.Contains(out, "allowed_hosts") || !strings.Contains(out, "--allow-host") {
		t.Errorf("a host off the list: %s", out)
	}
	if out := snagCaptureFails(t, d, srv.URL+"/away"); !strings.Contains(out, "localhost") {
		t.Errorf("a redirect off the list: %s", out)
	}
	mu.Lock()
	if hits["/broken"] != 0 {
		t.Errorf("the page off the list was asked for %d times: it must be refused before any request", hits["/broken"])
	}
	mu.Unlock()
	if out := snagCaptureFails(t, d, srv.URL+"/busy", "--timeout", "12s"); !strings.Contains(out, "--wait-for") || !strings.Contains(out, "/hang") {
		t.Errorf("a page that never settles: %s", out)
	}
	if after := shotsAndTasks(t, root); !slices.Equal(before, after) {
		t.Errorf("refused captures wrote files: %q, then %q", before, after)
	}
	// --wait-for lets the busy page count as settled; --allow-host widens
	// the list for one capture.
	snagCapture(t, d, srv.URL+"/busy", "--wait-for", "#p", "--timeout", "10s")
	snagCapture(t, d, local+"/broken", "--allow-host")
}
