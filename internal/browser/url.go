package browser

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrRefused is wrapped by the error of [CheckURL], and of [Run] for a URL
// that CheckURL refuses: the URL is not http or https, or its host is not
// allowed.
var ErrRefused = errors.New("refused")

// CheckURL reports whether the verifier may open raw: an http or https URL
// whose host is one of allowed (compared without case, brackets or a
// trailing dot, and without the port). Any other URL gets an error that
// wraps [ErrRefused] and names the fix.
func CheckURL(raw string, allowed []string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("browser: open %q: %w: not a URL (%v); capture the page again from its http(s) address", raw, ErrRefused, err)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return fmt.Errorf("browser: open %q: %w: scheme %q (only http and https pages on browser.allowed_hosts are verified; a person resolves this task)", raw, ErrRefused, u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("browser: open %q: %w: the URL has no host; capture the page again from its http(s) address", raw, ErrRefused)
	}
	if !hostAllowed(host, allowed) {
		return fmt.Errorf("browser: open %q: %w: host %q is not allowed (allowed: %s); add the host to browser.allowed_hosts in .snag/config.json", raw, ErrRefused, host, strings.Join(allowed, ", "))
	}
	return nil
}

// hostAllowed reports whether host is one of allowed.
func hostAllowed(host string, allowed []string) bool {
	host = canonicalHost(host)
	for _, a := range allowed {
		if canonicalHost(a) == host {
			return true
		}
	}
	return false
}

// canonicalHost lowercases a host name and drops IPv6 brackets and a
// trailing dot.
func canonicalHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
