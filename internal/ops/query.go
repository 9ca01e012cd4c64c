package ops

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/snagdev/snag/internal/queue"
)

// ListQuery is the query of GET /tasks. Its zero value lists the first
// page of the open queue. snagd refuses a parameter it does not know, one
// given twice, or a value it cannot read (400, naming it).
type ListQuery struct {
	// Statuses keeps tasks of these statuses (status=a,b); none: every
	// status but the inbox and the terminal ones, unless All.
	Statuses []queue.Status
	// Wave keeps one wave (wave=N); 0: every wave.
	Wave int
	// Kind keeps one kind (kind=bug).
	Kind queue.Kind
	// Plan keeps the tasks of one plan (plan=NAME).
	Plan string
	// All lists every task, inbox and terminal ones included (all=true).
	All bool
	// Limit is the most tasks on the page (limit=N), from 1 to 10000;
	// 0: 20.
	Limit int
	// Cursor continues a list after the page a TaskList.Next came with
	// (cursor=...).
	Cursor string
}

// Encode is the query string of GET /tasks for q, without the "?"; a zero
// field is left out.
func (q ListQuery) Encode() string {
	v := url.Values{}
	if len(q.Statuses) > 0 {
		s := make([]string, len(q.Statuses))
		for i, st := range q.Statuses {
			s[i] = string(st)
		}
		v.Set("status", strings.Join(s, ","))
	}
	if q.Wave != 0 {
		v.Set("wave", strconv.Itoa(q.Wave))
	}
	if q.Kind != "" {
		v.Set("kind", string(q.Kind))
	}
	if q.Plan != "" {
		v.Set("plan", q.Plan)
	}
	if q.All {
		v.Set("all", "true")
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	return v.Encode()
}

// SearchQuery is the query of GET /search.
type SearchQuery struct {
	// Q is the words to look for (q=...) in titles, bodies, console errors
	// and suspect file paths: the last one as a prefix, the others whole.
	Q string
	// Limit is the most hits (limit=N), at most 100; 0: 20.
	Limit int
}

// Encode is the query string of GET /search for q, without the "?".
func (q SearchQuery) Encode() string {
	v := url.Values{"q": {q.Q}}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v.Encode()
}

// AuditQuery is the query of GET /audit.
type AuditQuery struct {
	// After keeps the entries after this id (after=N); 0: from the start.
	After int64
	// Limit is the most entries (limit=N), at most 1000; 0: 100.
	Limit int
	// Tail, when set (tail=N, at most 1000), asks for the latest N entries
	// instead, oldest first; After and Limit are then not used.
	Tail int
}

// Encode is the query string of GET /audit for q, without the "?".
func (q AuditQuery) Encode() string {
	v := url.Values{}
	if q.After != 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Tail != 0 {
		v.Set("tail", strconv.Itoa(q.Tail))
	}
	return v.Encode()
}

// MessageQuery is the query of GET /reports and GET /handoffs.
type MessageQuery struct {
	// To keeps the handoffs addressed to this agent (to=NAME).
	To string
	// Limit is the most messages (limit=N), at most 200; 0: 20.
	Limit int
}

// Encode is the query string for q, without the "?".
func (q MessageQuery) Encode() string {
	v := url.Values{}
	if q.To != "" {
		v.Set("to", q.To)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v.Encode()
}
