package daemon

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests drive the pairing codes and the capture credentials' file
// on a clock of their own, for what a real snagd would take minutes to
// show: a code's expiry, the try bucket refilling. extension_test.go has
// the same through a real snagd, and the extension in Chromium.

// clock is a time a test moves on by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time       { return c.t }
func (c *clock) step(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                { return &clock{t: time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)} }
func testPairing(t *testing.T) *pairing {
	return newPairing(t.TempDir(), "/src/shop", 7654, slog.New(slog.DiscardHandler))
}
func (p *pairing) withClock(c *clock) *pairing { p.now = c.now; return p }

// try takes code, waiting out the bucket first so that only the code
// decides.
func try(p *pairing, c *clock, code string) *apiError {
	c.step(tryEvery)
	_, e := p.take(code)
	return e
}

func TestPairingCodeIsShortAndUnambiguous(t *testing.T) {
	t.Parallel()
	for _, bad := range "01OILU" {
		if strings.ContainsRune(codeAlphabet, bad) {
			t.Errorf("the alphabet has %q, which reads like another symbol", bad)
		}
	}
	seen := map[string]bool{}
	for range 200 {
		c, err := newCode()
		if err != nil {
			t.Fatal(err)
		}
		if len(c) != codeLen || strings.Trim(c, codeAlphabet) != "" {
			t.Fatalf("code %q: want %d symbols of %s", c, codeLen, codeAlphabet)
		}
		seen[c] = true
		if shown := showCode(c); len(shown) != 7 || shown[3] != '-' || readCode(shown) != c ||
			readCode(strings.ToLower(shown[:3]+" "+shown[4:])) != c {
			t.Errorf("code %q is shown as %q, which does not read back", c, shown)
		}
	}
	if len(seen) < 199 {
		t.Errorf("200 codes drawn, %d different", len(seen))
	}
	pc, err := testPairing(t).mint()
	if err != nil || pc.Line != "127.0.0.1:7654 "+pc.Code || pc.Address != "127.0.0.1:7654" {
		t.Errorf("mint: %+v, %v", pc, err)
	}
}

// TestPairingCodeWorksOnceForFiveMinutes: a code is taken once, within 5
// minutes; a used, expired or wrong code is refused with one sentence.
func TestPairingCodeWorksOnceForFiveMinutes(t *testing.T) {
	t.Parallel()
	c := newClock()
	p := testPairing(t).withClock(c)
	first, _ := p.mint()
	c.step(5*time.Minute - tryEvery - time.Millisecond)
	if e := try(p, c, first.Code); e != nil {
		t.Fatalf("a code 5 minutes less a moment old: %v", e)
	}
	used := try(p, c, first.Code)
	second, _ := p.mint()
	c.step(5 * time.Minute)
	expired := try(p, c, second.Code)
	wrong := try(p, c, "ZZZ-ZZZ")
	for name, e := range map[string]*apiError{"used": used, "expired": expired, "wrong": wrong} {
		if e == nil || e.Status != http.StatusForbidden || e.Code != "bad_pairing_code" || e.Message != wrong.Message {
			t.Errorf("a %s code: %+v; want 403 bad_pairing_code, the same sentence for all", name, e)
		}
	}
}

// TestPairingKeepsThreeCodes: a fourth code voids the oldest.
func TestPairingKeepsThreeCodes(t *testing.T) {
	t.Parallel()
	c := newClock()
	p := testPairing(t).withClock(c)
	var codes []string
	for range 4 {
		pc, _ := p.mint()
		codes = append(codes, pc.Code)
	}
	if e := try(p, c, codes[0]); e == nil {
		t.Errorf("the oldest of four codes was taken")
	}
	for _, code := range codes[1:] {
		if e := try(p, c, code); e != nil {
			t.Errorf("code %s of the last three: %v", code, e)
		}
	}
}

// TestPairingVoidsOpenCodesAfterWrongOnes: after maxWrong wrong codes every open code
// is void, so a guesser has maxWrong tries at each code snag pair prints.
func TestPairingVoidsOpenCodesAfterWrongOnes(t *testing.T) {
	t.Parallel()
	c := newClock()
	p := testPairing(t).withClock(c)
	pc, _ := p.mint()
	for range maxWrong {
		try(p, c, "ZZZ-ZZZ")
	}
	if e := try(p, c, pc.Code); e == nil || e.Code != "bad_pairing_code" {
		t.Errorf("the right code after %d wrong ones: %v; want it void", maxWrong, e)
	}
	pc, _ = p.mint()
	if e := try(p, c, pc.Code); e != nil {
		t.Errorf("a new code after the void: %v", e)
	}
}

// TestPairingTriesAreRateLimited: tryBurst tries at once, then one per
// tryEvery; a try over the limit is told how long to wait and does not
// count as a wrong code.
func TestPairingTriesAreRateLimited(t *testing.T) {
	t.Parallel()
	c := newClock()
	p := testPairing(t).withClock(c)
	pc, _ := p.mint()
	for i := range tryBurst {
		if _, e := p.take("ZZZ-ZZZ"); e == nil || e.Code != "bad_pairing_code" {
			t.Fatalf("try %d of the burst: %+v", i+1, e)
		}
	}
	wait, e := p.take(pc.Code)
	if e == nil || e.Status != http.StatusTooManyRequests || e.Code != "too_many_tries" || wait != tryEvery || !strings.Contains(e.Message, "2 s") {
		t.Fatalf("a try past the burst: %+v, wait %v; want 429 too_many_tries, 2 s", e, wait)
	}
	c.step(tryEvery)
	if _, e := p.take(pc.Code); e != nil {
		t.Errorf("the right code once the bucket refilled: %v", e)
	}
}

// TestCaptureCredentialsFile: a pairing writes the credential's hash, never the
// credential, mode 0600; another snagd of the same user sees it, and its
// revoke counts here at once. A file open to others is refused with the
// chmod that mends it.
func TestCaptureCredentialsFile(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	here := newPairing(home, "/src/shop", 7654, log)
	there := newPairing(home, "/src/blog", 7655, log)
	pc, _ := here.mint()
	paired, _, e := here.pair(pc.Code, "chrome-extension://ffaheohanfnlpohalklahnelknlnllmf")
	if e != nil {
		t.Fatal(e)
	}
	path := filepath.Join(home, CredentialsFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want 0600", path, err, fi.Mode())
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), paired.Credential[len("snagcap_"):]) || !strings.Contains(string(raw), hashSecret(paired.Credential)) {
		t.Errorf("%s holds the credential, or not its hash:\n%s", path, raw)
	}
	if e := here.admit(paired.Credential, paired.Origin); e != nil {
		t.Errorf("the credential here: %v", e)
	}
	// Another project's snagd knows it, and does not take it.
	if e := there.admit(paired.Credential, paired.Origin); e == nil || e.Code != "not_paired" {
		t.Errorf("the credential at another project's snagd: %v; want not_paired", e)
	}
	if e := here.admit(paired.Credential, "chrome-extension://abcdefghijklmnopabcdefghijklmnop"); e == nil || e.Code != "bad_origin" {
		t.Errorf("the credential from another extension: %v; want bad_origin", e)
	}
	if n, err := there.creds.revoke(); err != nil || n != 1 {
		t.Fatalf("revoke through the other snagd: %d, %v", n, err)
	}
	if e := here.admit(paired.Credential, paired.Origin); e == nil || e.Code != "not_paired" {
		t.Errorf("the credential after a revoke through another snagd: %v; want not_paired", e)
	}
	os.Chmod(path, 0o644)
	if _, err := newPairing(home, "/src/shop", 7654, log).creds.current(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a file open to others: %v; want an error naming chmod 600", err)
	}
}
