package api_test

import (
	"testing"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

// TestQueryEncode pins the query strings the clients send: a zero field
// is left out, so the zero query asks for snagd's defaults.
func TestQueryEncode(t *testing.T) {
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"zero list", api.ListQuery{}.Encode(), ""},
		{"full list", api.ListQuery{Statuses: []queue.Status{queue.StatusOpen, queue.StatusClaimed}, Wave: 2, Kind: queue.Kind("bug"),
			Plan: "p 1", All: true, Limit: 5, Cursor: "c/1"}.Encode(),
			"all=true&cursor=c%2F1&kind=bug&limit=5&plan=p+1&status=open%2Cclaimed&wave=2"},
		{"search", api.SearchQuery{Q: "safari checkout"}.Encode(), "q=safari+checkout"},
		{"search limit", api.SearchQuery{Q: "x", Limit: 3}.Encode(), "limit=3&q=x"},
		{"zero audit", api.AuditQuery{}.Encode(), ""},
		{"audit", api.AuditQuery{After: 9, Limit: 2}.Encode(), "after=9&limit=2"},
	} {
		if c.got != c.want {
			t.Errorf("%s: Encode() = %q, want %q", c.name, c.got, c.want)
		}
	}
}
