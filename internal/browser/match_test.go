package browser

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/runtime"
	"github.com/google/go-cmp/cmp"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"TypeError: cart is undefined (checkout.ts:131)", "TypeError: cart is undefined"},
		{"Uncaught TypeError: cart is undefined", "TypeError: cart is undefined"},
		{"Uncaught (in promise) Error: 500", "Error: 500"},
		{"TypeError: cart is undefined (http://localhost:3000/src/checkout.ts:131:7)", "TypeError: cart is undefined"},
		{"TypeError: cart is undefined at checkout.ts:131:7", "TypeError: cart is undefined"},
		{"TypeError: cart is undefined at render (http://localhost:3000/app.js:3:9)", "TypeError: cart is undefined"},
		{"TypeError: cart is undefined\n    at render (app.js:3:9)\n    at main (app.js:9:1)", "TypeError: cart is undefined"},
		{"  cart:   load\tfailed  ", "cart: load failed"},
		{"line one\nline two", "line one line two"},
		// What is not a location stays.
		{"Failed at step 3", "Failed at step 3"},
		{"Cannot read properties of undefined (reading 'total')", "Cannot read properties of undefined (reading 'total')"},
		{"Cannot read properties of undefined (reading 'total') (checkout.js:2)", "Cannot read properties of undefined (reading 'total')"},
		{"retry (attempt 2)", "retry (attempt 2)"},
		{"Uncaught", "Uncaught"},
		{"", ""},
	} {
		if got := normalize(tc.in); got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMatcher(t *testing.T) {
	m := newMatcher([]string{"TypeError: cart is undefined (checkout.ts:131)", "  ", "cart: load failed"})
	for _, tc := range []struct {
		fresh string
		want  string // the captured error matched, "" for none
	}{
		{"Uncaught TypeError: cart is undefined", "TypeError: cart is undefined (checkout.ts:131)"},
		{"TypeError: cart is undefined\n    at checkout (checkout.ts:131:7)", "TypeError: cart is undefined (checkout.ts:131)"},
		{"cart: load  failed", "cart: load failed"},
		{"typeerror: cart is undefined", ""},
		{"TypeError: cart is null", ""},
		{"", ""},
	} {
		got, ok := m.match(tc.fresh)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("match(%q) = %q, %v; want %q", tc.fresh, got, ok, tc.want)
		}
	}
	if m.empty() {
		t.Error("empty() = true with two errors to compare")
	}
	if !newMatcher([]string{"", " \n "}).empty() {
		t.Error("a capture of blank errors has something to compare")
	}
}

func TestConsoleText(t *testing.T) {
	str := func(s string) *runtime.RemoteObject {
		return &runtime.RemoteObject{Type: runtime.RemoteObjectTypeString, Value: []byte(`"` + s + `"`)}
	}
	num := func(v string) *runtime.RemoteObject {
		return &runtime.RemoteObject{Type: runtime.RemoteObjectTypeNumber, Value: []byte(v)}
	}
	errObj := &runtime.RemoteObject{Type: runtime.RemoteObjectTypeObject, Subtype: runtime.RemoteObjectSubtypeError,
		Description: "TypeError: cart is undefined\n    at checkout (checkout.ts:131:7)"}
	for _, tc := range []struct {
		name string
		args []*runtime.RemoteObject
		want string
	}{
		{"string", []*runtime.RemoteObject{str("cart: load failed")}, "cart: load failed"},
		{"format", []*runtime.RemoteObject{str("cart %s failed after %d tries%c"), str("load"), num("3.7"), str("color: red")}, "cart load failed after 3 tries"},
		{"extra args", []*runtime.RemoteObject{str("failed:"), errObj, num("2")}, "failed: TypeError: cart is undefined 2"},
		{"error object", []*runtime.RemoteObject{errObj}, "TypeError: cart is undefined"},
		{"percent", []*runtime.RemoteObject{str("100%% done %x")}, "100% done %x"},
		{"null and undefined", []*runtime.RemoteObject{{Type: runtime.RemoteObjectTypeObject, Subtype: runtime.RemoteObjectSubtypeNull}, {Type: runtime.RemoteObjectTypeUndefined}}, "null undefined"},
		{"none", nil, ""},
	} {
		if got := consoleText(tc.args); got != tc.want {
			t.Errorf("%s: consoleText = %q, want %q", tc.name, got, tc.want)
		}
	}
	d := &runtime.ExceptionDetails{Text: "Uncaught", Exception: errObj}
	if got, want := exceptionText(d), "Uncaught TypeError: cart is undefined"; got != want {
		t.Errorf("exceptionText = %q, want %q", got, want)
	}
}

func TestCheckURL(t *testing.T) {
	defaults := []string{"localhost", "127.0.0.1", "::1"}
	for _, tc := range []struct {
		raw     string
		allowed []string
		fix     string // in the error; "" means allowed
	}{
		{"http://localhost:3000/checkout#total", defaults, ""},
		{"https://127.0.0.1/", defaults, ""},
		{"http://[::1]:8080/", defaults, ""},
		{"HTTP://LocalHost./x", defaults, ""},
		{"http://app.test:5173/", []string{"APP.test"}, ""},
		{"http://[::1]/", []string{"[::1]"}, ""},
		{"http://example.com/", defaults, "add the host to browser.allowed_hosts in .snag/config.json"},
		{"http://localhost@example.com/", defaults, `host "example.com" is not allowed`},
		{"http://localhost.example.com/", defaults, "browser.allowed_hosts"},
		{"http://2130706433/", defaults, "browser.allowed_hosts"},
		{"http://localhost/", nil, "browser.allowed_hosts"},
		{"file:///etc/passwd", defaults, `scheme "file"`},
		{"data:text/html,hi", defaults, `scheme "data"`},
		{"javascript:alert(1)", defaults, `scheme "javascript"`},
		{"chrome://version", defaults, `scheme "chrome"`},
		{"ws://localhost/", defaults, `scheme "ws"`},
		{"localhost:3000/checkout", defaults, "scheme"},
		{"http:///nohost", defaults, "no host"},
		{"http://local host/", defaults, "not a URL"},
	} {
		err := CheckURL(tc.raw, tc.allowed)
		switch {
		case tc.fix == "" && err != nil:
			t.Errorf("CheckURL(%q) = %v, want nil", tc.raw, err)
		case tc.fix != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.fix)):
			t.Errorf("CheckURL(%q) = %v, want ErrRefused saying %q", tc.raw, err, tc.fix)
		}
	}
}

func TestJudge(t *testing.T) {
	base := judgement{url: "http://localhost:3000/checkout", settle: 500 * time.Millisecond, timeout: 30 * time.Second, compare: true}
	with := func(f func(*judgement)) judgement { j := base; f(&j); return j }
	for _, tc := range []struct {
		name    string
		j       judgement
		outcome string
		reason  string
	}{
		{"pass", base, Pass, "None of the captured console errors appeared within 500ms of the page's load."},
		{"matched", with(func(j *judgement) { j.matched = []string{"a", "b"} }), Fail,
			`The captured console error "a" appeared again, and 1 more of the captured errors did.`},
		{"inconclusive", with(func(j *judgement) { j.compare = false; j.seen = []string{"x"} }), Inconclusive,
			"The capture had no console error to compare, so a person should look at the screenshot. 1 console error(s) appeared this time."},
		{"timeout and matched", with(func(j *judgement) { j.timedOut = true; j.matched = []string{"a"} }), Fail,
			`The page did not finish loading within the 30s timeout; check that the server at localhost:3000 answers, then verify again. The captured console error "a" appeared again.`},
		{"blocked wins", with(func(j *judgement) { j.blocked = "http://evil.test/"; j.timedOut = true }), Fail,
			"The page went to http://evil.test/, whose host is not allowed, and the verifier did not follow it; if that host is yours, add it to browser.allowed_hosts in .snag/config.json."},
		{"load error", with(func(j *judgement) { j.loadErr = errors.New("net::ERR_CONNECTION_REFUSED") }), Fail,
			"The page could not be loaded (net::ERR_CONNECTION_REFUSED); start the server at localhost:3000, then verify again."},
		{"anchor gone", with(func(j *judgement) { j.anchor = "#pay" }), Pass,
			`None of the captured console errors appeared within 500ms of the page's load. The captured anchor "#pay" is gone from the page.`},
		{"anchor found", with(func(j *judgement) { j.anchor = "#pay"; j.anchorFound = true }), Pass,
			"None of the captured console errors appeared within 500ms of the page's load."},
	} {
		outcome, reason := tc.j.judge()
		if outcome != tc.outcome {
			t.Errorf("%s: outcome = %q, want %q", tc.name, outcome, tc.outcome)
		}
		if diff := cmp.Diff(tc.reason, reason); diff != "" {
			t.Errorf("%s: reason (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	got := clip(long, maxReason)
	if len(got) > maxReason || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("clip gave %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got[len(got)-10:])
	}
	if got := clip("short", maxReason); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
}
