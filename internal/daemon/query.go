package daemon

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// query reads a request's query parameters. A parameter the endpoint does
// not know, a value it cannot read, or one given twice is refused with a
// 400 that names it, rather than silently read as its default
// (?all=1 used to list as if all were not set).
type query struct {
	v   url.Values
	err *apiError
}

// readQuery checks that r's query has only the known parameters, each once.
func readQuery(r *http.Request, known ...string) *query {
	q := &query{v: r.URL.Query()}
	names := make([]string, 0, len(q.v))
	for k := range q.v {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		switch {
		case !slices.Contains(known, k):
			q.fail("bad_query", "unknown query parameter %q (this endpoint takes %s)", k, strings.Join(known, ", "))
		case len(q.v[k]) > 1:
			q.fail("bad_query", "query parameter %q is given %d times: give it once", k, len(q.v[k]))
		}
	}
	return q
}

func (q *query) fail(code, format string, args ...any) {
	if q.err == nil {
		q.err = &apiError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
	}
}

// str is a parameter's value, "" when absent.
func (q *query) str(name string) string { return q.v.Get(name) }

// flag reads a yes-or-no parameter: 1, true or yes; 0, false or no (in any
// case); absent or empty is no.
func (q *query) flag(name string) bool {
	switch strings.ToLower(q.v.Get(name)) {
	case "1", "true", "yes":
		return true
	case "", "0", "false", "no":
		return false
	}
	q.fail("bad_"+name, "%s=%q: want 1, true or yes (or 0, false, no)", name, q.v.Get(name))
	return false
}

// int reads a whole number from lo to hi; absent or empty is def.
func (q *query) int(name string, lo, hi, def int) int {
	s := q.v.Get(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		q.fail("bad_"+name, "%s=%q: want a whole number from %d to %d", name, s, lo, hi)
		return def
	}
	return n
}

func joinStrings[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
