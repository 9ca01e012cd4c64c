package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// ConfigVersion is the config.json version this snag writes and reads.
const ConfigVersion = 1

// Config is .snag/config.json: the project's settings, committed with it.
type Config struct {
	Version int `json:"version"`
	// Workspace names the project where clones of it meet (snagd checks
	// that a request names it): absent, the normalised URL of the git
	// remote origin, else the folder's name.
	Workspace string        `json:"workspace,omitempty"`
	Verify    VerifyConfig  `json:"verify"`
	Plan      PlanConfig    `json:"plan"`
	Browser   BrowserConfig `json:"browser"`
	Claim     ClaimConfig   `json:"claim"`
}

// ClaimConfig holds settings of leases.
type ClaimConfig struct {
	// MaxPerSession bounds how many tasks one session may hold at once.
	// Absent means 1: an agent works on one task at a time, so a claimed
	// task is one somebody has started. 0 means no bound.
	MaxPerSession *int `json:"max_per_session,omitempty"`
	// Worktree gives every claim a git worktree of its own, on a branch
	// snag/<key>, as snag_claim's worktree argument does.
	Worktree bool `json:"worktree,omitempty"`
	// WorktreeDir is the folder task worktrees go in, relative to the
	// repository's top folder; {repo} is that folder's name. Default
	// ../{repo}.snag.
	WorktreeDir string `json:"worktree_dir,omitempty"`
	// Base is the branch (or any commit) a task's branch starts from when
	// the claim names none; default the repository's default branch (the
	// one origin's HEAD names, else the main worktree's).
	Base string `json:"base,omitempty"`
}

// DefaultMaxPerSession is how many tasks a session may hold when
// config.json does not say.
const DefaultMaxPerSession = 1

// MaxPerSession is how many tasks one session may hold at once; 0 means any
// number.
func (c Config) MaxPerSession() int {
	if c.Claim.MaxPerSession == nil {
		return DefaultMaxPerSession
	}
	return *c.Claim.MaxPerSession
}

// VerifyConfig is the project's verify step (DESIGN section 11).
type VerifyConfig struct {
	// Command runs in the project root; exit 0 passes. Empty: no project-wide
	// command.
	Command string `json:"command,omitempty"`
	// TimeoutSeconds bounds one run of Command, or one page check of the
	// browser verifier.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// Shell runs commands through /bin/sh -c. Off by default: a command is
	// split into words like a shell would, but pipes, redirections,
	// variables and globs are refused rather than interpreted.
	Shell bool `json:"shell,omitempty"`
	// MaxConcurrent bounds how many verify runs go at once.
	MaxConcurrent int `json:"max_concurrent,omitempty"`
}

// PlanConfig holds settings of the queue's flow.
type PlanConfig struct {
	// VerifyOnResolve, when false, lets resolve go straight to resolved with
	// verified: false. Absent means true.
	VerifyOnResolve *bool `json:"verify_on_resolve,omitempty"`
}

// BrowserConfig holds settings of the browser verifier.
type BrowserConfig struct {
	// AllowedHosts are the hosts a captured URL may point at.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// Chromium is the path of the browser; empty finds chromium (or
	// chromium-browser, google-chrome) on PATH.
	Chromium string `json:"chromium,omitempty"`
	// SettleMS is how long the page may keep running after load before
	// its console errors are counted.
	SettleMS int `json:"settle_ms,omitempty"`
}

// Defaults for settings config.json leaves out.
const (
	DefaultVerifyTimeoutSeconds = 300
	DefaultVerifyMaxConcurrent  = 2
	DefaultBrowserSettleMS      = 500
)

// DefaultAllowedHosts are the hosts the browser verifier may open when
// config.json names none.
var DefaultAllowedHosts = []string{"localhost", "127.0.0.1", "::1"}

// DefaultConfig is the config snag init writes.
func DefaultConfig() Config {
	return Config{Version: ConfigVersion}.withDefaults()
}

// VerifyOnResolve reports whether resolve goes through verify.
func (c Config) VerifyOnResolve() bool {
	return c.Plan.VerifyOnResolve == nil || *c.Plan.VerifyOnResolve
}

func (c Config) withDefaults() Config {
	if c.Verify.TimeoutSeconds == 0 {
		c.Verify.TimeoutSeconds = DefaultVerifyTimeoutSeconds
	}
	if c.Verify.MaxConcurrent == 0 {
		c.Verify.MaxConcurrent = DefaultVerifyMaxConcurrent
	}
	if c.Browser.SettleMS == 0 {
		c.Browser.SettleMS = DefaultBrowserSettleMS
	}
	if len(c.Browser.AllowedHosts) == 0 {
		c.Browser.AllowedHosts = DefaultAllowedHosts
	}
	if c.Claim.MaxPerSession == nil {
		n := DefaultMaxPerSession
		c.Claim.MaxPerSession = &n
	}
	return c
}

// LoadConfig reads config.json at path. A missing file gives the defaults;
// an unknown key or a bad value is an error that names it and the fix.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultConfig(), nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return c, nil
}

// ParseConfig decodes config.json bytes strictly and fills in defaults.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			return Config{}, fmt.Errorf("line %d: invalid JSON: %v", line, se)
		case errors.As(err, &te):
			if te.Field == "" {
				return Config{}, fmt.Errorf("must be one JSON object, like {\"version\": %d}, not a JSON %s", ConfigVersion, te.Value)
			}
			return Config{}, fmt.Errorf("%s: want %s, not a JSON %s", te.Field, jsonKind(te.Type.Kind()), te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.TrimPrefix(err.Error(), "json: unknown field ")
			return Config{}, fmt.Errorf("unknown key %s (known: version, verify.command, verify.timeout_seconds, verify.shell, verify.max_concurrent, plan.verify_on_resolve, browser.allowed_hosts, browser.chromium, browser.settle_ms, claim.max_per_session): remove it or fix its spelling", field)
		}
		return Config{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return Config{}, errors.New("invalid JSON: more than one value: keep one {...} object")
	}
	switch {
	case c.Version == 0:
		return Config{}, fmt.Errorf(`version: missing: add "version": %d`, ConfigVersion)
	case c.Version > ConfigVersion:
		return Config{}, fmt.Errorf("version: %d is newer than this snag understands (%d): upgrade snag", c.Version, ConfigVersion)
	case c.Version < 0:
		return Config{}, fmt.Errorf("version: %d is not a version (want %d)", c.Version, ConfigVersion)
	case c.Verify.TimeoutSeconds < 0:
		return Config{}, errors.New("verify.timeout_seconds: must be positive (seconds one verify run may take)")
	case c.Verify.MaxConcurrent < 0:
		return Config{}, errors.New("verify.max_concurrent: must be positive (how many verify runs may go at once)")
	case c.Browser.SettleMS < 0:
		return Config{}, errors.New("browser.settle_ms: must be positive (milliseconds a page may settle after load)")
	case c.Claim.MaxPerSession != nil && *c.Claim.MaxPerSession < 0:
		return Config{}, fmt.Errorf("claim.max_per_session: %d is not a count: want 1 (one task per agent at a time, the default), a larger number, or 0 for no limit", *c.Claim.MaxPerSession)
	}
	for _, h := range c.Browser.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ :@") && !strings.Contains(h, "::") {
			return Config{}, fmt.Errorf("browser.allowed_hosts: %q is not a host name (want names like localhost)", h)
		}
	}
	return c.withDefaults(), nil
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Bool, reflect.Pointer:
		return "true or false"
	case reflect.Slice:
		return "a list"
	case reflect.Struct:
		return "an object {...}"
	}
	return "a string"
}

// MarshalIndent renders the config as snag init writes it.
func (c Config) MarshalIndent() []byte {
	out := Config{Version: c.Version, Verify: c.Verify, Plan: c.Plan, Browser: c.Browser, Claim: c.Claim}
	b, _ := json.MarshalIndent(out, "", "  ")
	return append(b, '\n')
}
