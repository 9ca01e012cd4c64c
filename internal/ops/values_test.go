package ops_test

import (
	"net/url"
	"reflect"
	"testing"

	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
)

// TestDecodeQuery reads queries as snagd's routes do: each parameter
// once, known, readable and in bounds, or a 400 naming it.
func TestDecodeQuery(t *testing.T) {
	tests := []struct {
		name, query string
		want        ops.ListQuery
		code        string
	}{
		{"empty", "", ops.ListQuery{}, ""},
		{"all of it", "status=open,claimed&wave=2&kind=bug&plan=p+1&all=yes&limit=5&cursor=c%2F1",
			ops.ListQuery{Statuses: []queue.Status{"open", "claimed"}, Wave: 2, Kind: "bug", Plan: "p 1", All: true, Limit: 5, Cursor: "c/1"}, ""},
		{"a flag off", "all=0", ops.ListQuery{}, ""},
		{"unknown", "colour=red", ops.ListQuery{}, "bad_query"},
		{"twice", "wave=1&wave=2", ops.ListQuery{}, "bad_query"},
		{"not a number", "wave=two", ops.ListQuery{}, "bad_wave"},
		{"under its floor", "limit=0", ops.ListQuery{}, "bad_limit"},
		{"over its cap", "limit=10001", ops.ListQuery{}, "bad_limit"},
		{"not a flag", "all=maybe", ops.ListQuery{}, "bad_all"},
		{"empty is absent", "limit=&plan=", ops.ListQuery{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			var got ops.ListQuery
			err = ops.DecodeQuery(vals, &got)
			if tt.code != "" {
				e, ok := err.(*ops.Error)
				if !ok || e.Code != tt.code || e.Status != 400 {
					t.Fatalf("DecodeQuery(%q) = %v, want a 400 %s", tt.query, err, tt.code)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("DecodeQuery(%q) = %+v, %v; want %+v", tt.query, got, err, tt.want)
			}
		})
	}
}

// TestQueryAlias reads a parameter's second name, and an empty twin does
// not undo the other.
func TestQueryAlias(t *testing.T) {
	for _, q := range []string{"kind=decision", "type=decision", "type=&kind=decision"} {
		vals, _ := url.ParseQuery(q)
		var got ops.NoteQuery
		if err := ops.DecodeQuery(vals, &got); err != nil || got.Type != "decision" {
			t.Errorf("%s: %+v, %v; want type decision", q, got, err)
		}
	}
}

// TestPathAndTarget fills a route's path from a request's path fields,
// escaped, and names them for the audit log.
func TestPathAndTarget(t *testing.T) {
	req := ops.TaskMove{Ref: "SNAG-1/../x", Action: "promote"}
	if got, want := ops.Path("/tasks/{ref}/{action}", req), "/tasks/SNAG-1%2F..%2Fx/promote"; got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
	if got, want := ops.Target(req), "SNAG-1/../x promote"; got != want {
		t.Errorf("Target = %q, want %q", got, want)
	}
	var end ops.EndRequest
	err := ops.SetPath(&end, func(string) string { return "x1" })
	if e, ok := err.(*ops.Error); !ok || e.Code != "bad_session" {
		t.Errorf("SetPath of a session id x1 = %v, want bad_session", err)
	}
}

// FuzzQueryRoundTrip: what EncodeQuery writes, DecodeQuery reads back.
func FuzzQueryRoundTrip(f *testing.F) {
	f.Add("open,claimed", 2, "bug", "p 1", true, 5, "c/1")
	f.Add("", 0, "", "", false, 0, "")
	f.Fuzz(func(t *testing.T, statuses string, wave int, kind, plan string, all bool, limit int, cursor string) {
		in := ops.ListQuery{Wave: wave & (1<<30 - 1), Kind: queue.Kind(kind), Plan: plan, All: all, Limit: limit%10000 + 1, Cursor: cursor}
		if in.Limit < 1 {
			in.Limit = 1
		}
		if statuses != "" {
			in.Statuses = []queue.Status{queue.Status(statuses)}
		}
		vals, err := url.ParseQuery(ops.EncodeQuery(in))
		if err != nil {
			t.Fatal(err)
		}
		var out ops.ListQuery
		if err := ops.DecodeQuery(vals, &out); err != nil {
			t.Fatalf("DecodeQuery(EncodeQuery(%+v)): %v", in, err)
		}
		// A comma in a status splits it: the list is comma-separated.
		if len(in.Statuses) == 1 && len(out.Statuses) > 0 {
			out.Statuses = []queue.Status{queue.Status(joinStatuses(out.Statuses))}
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("round trip: %+v became %+v", in, out)
		}
	})
}

func joinStatuses(ss []queue.Status) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += string(s)
	}
	return out
}
