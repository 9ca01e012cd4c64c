package queue_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/queue"
)

func TestLoadConfig_Missing(t *testing.T) {
	got, err := queue.LoadConfig(filepath.Join(t.TempDir(), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	one := queue.DefaultMaxPerSession
	want := queue.Config{
		Version: queue.ConfigVersion,
		Verify:  queue.VerifyConfig{TimeoutSeconds: queue.DefaultVerifyTimeoutSeconds, MaxConcurrent: queue.DefaultVerifyMaxConcurrent},
		Browser: queue.BrowserConfig{AllowedHosts: []string{"localhost", "127.0.0.1", "::1"}, SettleMS: queue.DefaultBrowserSettleMS},
		Claim:   queue.ClaimConfig{MaxPerSession: &one},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadConfig(missing) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, queue.DefaultConfig()); diff != "" {
		t.Errorf("DefaultConfig (-want +got):\n%s", diff)
	}
	if !got.VerifyOnResolve() {
		t.Error("VerifyOnResolve() = false by default")
	}
}

func TestLoadConfig_Example(t *testing.T) {
	got, err := queue.LoadConfig(filepath.Join(exampleDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	yes, one := true, 1
	want := queue.Config{
		Version: 1,
		Verify:  queue.VerifyConfig{Command: "go test ./...", TimeoutSeconds: 300, MaxConcurrent: 2},
		Plan:    queue.PlanConfig{VerifyOnResolve: &yes},
		Browser: queue.BrowserConfig{AllowedHosts: []string{"localhost", "127.0.0.1"}, SettleMS: 500},
		Claim:   queue.ClaimConfig{MaxPerSession: &one},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadConfig(example) (-want +got):\n%s", diff)
	}
}

func TestParseConfig(t *testing.T) {
	no := false
	tests := []struct {
		name string
		in   string
		want queue.Config
	}{
		{"version only", `{"version": 1}`, queue.DefaultConfig()},
		{"verify off", `{"version": 1, "plan": {"verify_on_resolve": false}}`, func() queue.Config {
			c := queue.DefaultConfig()
			c.Plan.VerifyOnResolve = &no
			return c
		}()},
		{"no claim limit", `{"version": 1, "claim": {"max_per_session": 0}}`, func() queue.Config {
			c := queue.DefaultConfig()
			n := 0
			c.Claim.MaxPerSession = &n
			return c
		}()},
		{"ipv6 host", `{"version": 1, "browser": {"allowed_hosts": ["::1", "shop.test"]}}`, func() queue.Config {
			c := queue.DefaultConfig()
			c.Browser.AllowedHosts = []string{"::1", "shop.test"}
			return c
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := queue.ParseConfig([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseConfig (-want +got):\n%s", diff)
			}
		})
	}
	c, _ := queue.ParseConfig([]byte(`{"version": 1, "plan": {"verify_on_resolve": false}}`))
	if c.VerifyOnResolve() {
		t.Error("VerifyOnResolve() = true with verify_on_resolve: false")
	}
	if n := c.MaxPerSession(); n != 1 {
		t.Errorf("MaxPerSession() = %d with no claim settings; want 1", n)
	}
	c, _ = queue.ParseConfig([]byte(`{"version": 1, "claim": {"max_per_session": 3}}`))
	if n := c.MaxPerSession(); n != 3 {
		t.Errorf("MaxPerSession() = %d with max_per_session: 3", n)
	}
}

func TestParseConfig_Errors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // the error contains each
	}{
		{"unknown key", `{"version": 1, "verfy": {}}`, []string{`unknown key "verfy"`, "known: version, verify.command", "remove it or fix its spelling"}},
		{"unknown nested key", `{"version": 1, "verify": {"comand": "make"}}`, []string{`unknown key "comand"`, "fix its spelling"}},
		{"wrong type", `{"version": 1, "verify": {"timeout_seconds": "5m"}}`, []string{"verify.timeout_seconds", "not a JSON string"}},
		{"wrong type for a list", `{"version": 1, "browser": {"allowed_hosts": "localhost"}}`, []string{"browser.allowed_hosts", "not a JSON string"}},
		{"newer version", `{"version": 2}`, []string{"version: 2 is newer than this snag understands (1)", "upgrade snag"}},
		{"missing version", `{"verify": {"command": "make"}}`, []string{"version: missing", `add "version": 1`}},
		{"negative version", `{"version": -1}`, []string{"version: -1 is not a version"}},
		{"negative timeout", `{"version": 1, "verify": {"timeout_seconds": -5}}`, []string{"verify.timeout_seconds: must be positive"}},
		{"negative claim limit", `{"version": 1, "claim": {"max_per_session": -1}}`, []string{"claim.max_per_session: -1 is not a count", "0 for no limit"}},
		{"claim limit not a number", `{"version": 1, "claim": {"max_per_session": "one"}}`, []string{"claim.max_per_session: want a whole number"}},
		{"host with a scheme", `{"version": 1, "browser": {"allowed_hosts": ["http://localhost"]}}`, []string{`"http://localhost" is not a host name`}},
		{"host with a port", `{"version": 1, "browser": {"allowed_hosts": ["localhost:3000"]}}`, []string{"is not a host name"}},
		{"empty host", `{"version": 1, "browser": {"allowed_hosts": [""]}}`, []string{`"" is not a host name`}},
		{"syntax error", "{\n  \"version\": 1,\n  \"verify\": {,}\n}", []string{"line 3: invalid JSON"}},
		{"trailing comma", "{\"version\": 1,}", []string{"line 1: invalid JSON"}},
		{"two values", `{"version": 1} {"version": 1}`, []string{"more than one value"}},
		{"empty", ``, []string{"invalid JSON"}},
		{"not an object", `[1]`, []string{"not a JSON array"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := queue.ParseConfig([]byte(tt.in))
			if err == nil {
				t.Fatal("ParseConfig accepted it")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadConfig_NamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"version": 1, "colour": "blue"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := queue.LoadConfig(path)
	if err == nil || !strings.HasPrefix(err.Error(), `config.json: unknown key "colour"`) {
		t.Errorf("LoadConfig = %v", err)
	}
	if _, err := queue.LoadConfig(t.TempDir()); err == nil {
		t.Error("LoadConfig of a folder succeeded")
	}
}

func TestConfig_MarshalIndentRoundTrip(t *testing.T) {
	no, three := false, 3
	for _, c := range []queue.Config{
		queue.DefaultConfig(),
		{Version: 1, Verify: queue.VerifyConfig{Command: "make check", TimeoutSeconds: 60, Shell: true, MaxConcurrent: 4},
			Plan: queue.PlanConfig{VerifyOnResolve: &no}, Browser: queue.BrowserConfig{AllowedHosts: []string{"shop.test"}, Chromium: "/opt/chromium", SettleMS: 250},
			Claim: queue.ClaimConfig{MaxPerSession: &three}},
	} {
		b := c.MarshalIndent()
		if !strings.HasSuffix(string(b), "}\n") || !strings.Contains(string(b), "\n  \"version\": 1") {
			t.Errorf("MarshalIndent = %s", b)
		}
		got, err := queue.ParseConfig(b)
		if err != nil {
			t.Fatalf("ParseConfig(MarshalIndent): %v\n%s", err, b)
		}
		if diff := cmp.Diff(c, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

// exampleDir is the sample project every test may read (never write).
const exampleDir = "../../.snag-example"
