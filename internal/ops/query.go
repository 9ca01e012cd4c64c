package ops

import (
	"github.com/snagdev/snag/internal/queue"
)

// ListQuery is the query of GET /tasks. Its zero value lists the first
// page of the open queue. snagd refuses a parameter it does not know, one
// given twice, or a value it cannot read (400, naming it).
type ListQuery struct {
	// Statuses keeps tasks of these statuses (status=a,b); none: every
	// status but the inbox and the terminal ones, unless All.
	Statuses []queue.Status `query:"status"`
	// Wave keeps one wave (wave=N); 0: every wave.
	Wave int `query:"wave"`
	// Kind keeps one kind (kind=bug).
	Kind queue.Kind `query:"kind"`
	// Plan keeps the tasks of one plan (plan=NAME).
	Plan string `query:"plan"`
	// All lists every task, inbox and terminal ones included (all=true).
	All bool `query:"all"`
	// Limit is the most tasks on the page (limit=N), from 1 to 10000;
	// 0: 20.
	Limit int `query:"limit" min:"1" max:"10000"`
	// Cursor continues a list after the page a TaskList.Next came with
	// (cursor=...).
	Cursor string `query:"cursor"`
}

// Encode is the query string of GET /tasks for q, without the "?"; a zero
// field is left out.
func (q ListQuery) Encode() string {
	return EncodeQuery(q)
}

// SearchQuery is the query of GET /search.
type SearchQuery struct {
	// Q is the words to look for (q=...) in titles, bodies, console errors
	// and suspect file paths: the last one as a prefix, the others whole.
	Q string `query:"q,always"`
	// Limit is the most hits (limit=N), at most 100; 0: 20.
	Limit int `query:"limit"`
}

// Encode is the query string of GET /search for q, without the "?".
func (q SearchQuery) Encode() string {
	return EncodeQuery(q)
}

// AuditQuery is the query of GET /audit.
type AuditQuery struct {
	// After keeps the entries after this id (after=N); 0: from the start.
	After int64 `query:"after" max:"4611686018427387904"`
	// Limit is the most entries (limit=N), at most 1000; 0: 100.
	Limit int `query:"limit"`
	// Tail, when set (tail=N, at most 1000), asks for the latest N entries
	// instead, oldest first; After and Limit are then not used.
	Tail int `query:"tail"`
}

// Encode is the query string of GET /audit for q, without the "?".
func (q AuditQuery) Encode() string {
	return EncodeQuery(q)
}

// MessageQuery is the query of GET /reports and GET /handoffs.
type MessageQuery struct {
	// To keeps the handoffs addressed to this agent (to=NAME).
	To string `query:"to"`
	// Limit is the most messages (limit=N), at most 200; 0: 20.
	Limit int `query:"limit"`
}

// Encode is the query string for q, without the "?".
func (q MessageQuery) Encode() string {
	return EncodeQuery(q)
}
