package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/token"
)

// snagdWrites are answers as snagd writes them, which the reader takes
// itself.
var snagdWrites = []string{
	`{"next":"","tasks":[]}`,
	`{"next":"","tasks":null}`,
	`{"next":"eyJ3IjoxfQ","tasks":[{"id":"tsk_01KE7ATTA0NEYBVKM5GXH402SV","key":"SNAG-51","title":"Country product overflows the session","status":"open","trust":"vetted","severity":"critical","kind":"bug","wave":1,"plan":"search-speedup","file":"server/orders/email.go:237-264","path":"tasks/SNAG-51 - Country product overflows the session.md","state":"ok"}]}`,
	`{"next":"","tasks":[{"id":"tsk_1","key":"SNAG-2","title":"Price shows € twice \u2014 \"quoted\" \\ and \ud83d\ude00 <b>&amp;</b>\ttab","status":"claimed","trust":"unvetted","severity":"low","kind":"ux","wave":12,"assignee":"VESPER","blocked_by":["SNAG-3","SNAG-4"],"path":"tasks/SNAG-2.md","state":"ok"},` +
		`{"id":"","key":"","title":"","status":"","trust":"","severity":"","kind":"","wave":0,"blocked_by":[],"path":"tasks/broken.md","state":"invalid","error":"parse tasks/broken.md: line 2: status: unknown value","stale":true,"duplicate":false}]}`,
	"{\n  \"next\" : \"\" ,\r\n\t\"tasks\" : [ { \"id\" : \"a\" , \"wave\" : -3 } ] }\n",
	`{"hits":null}`,
	`{"hits":[]}`,
	`{"hits":[{"id":"tsk_1","key":"SNAG-1","title":"Checkout","status":"open","trust":"vetted","severity":"high","kind":"bug","wave":1,"path":"tasks/SNAG-1.md","state":"ok","snippet":"the [checkout] button"}]}`,
	// Keys snagd may add later are skipped, whatever they hold.
	// A null is nothing, as encoding/json has it.
	`{"next":null,"tasks":[null,{"id":null,"wave":null,"stale":null,"blocked_by":null}]}`,
	`{"tasks":[{"id":"a","later":{"x":[1,-2.5e+3,true,false,null,"s\u00e9",{}],"y":[]},"more":0.5}],"total":3,"next":"n"}`,
}

// leftToJSON are answers the reader leaves to encoding/json, which then
// decodes them (or fails) as it always did.
var leftToJSON = []string{
	`{"Next":"x","tasks":[]}`,              // a key in another case
	`{"tasks":[{"ID":"a"}]}`,               // the same, in a task
	`{"tasks":[{"id":"a","id":"b"}]}`,      // a key twice
	`{"tasks":[],"tasks":[{"id":"b"}]}`,    // the page's too
	`{"t\u0061sks":[]}`,                    // an escaped key
	`{"tasks":[{"title":"\ud800 alone"}]}`, // a lone surrogate
	"{\"tasks\":[{\"title\":\"\xff\"}]}",   // invalid UTF-8
	`{"tasks":[{"wave":1.0}]}`,             // not a plain integer
	`{"tasks":[{"wave":1e2}]}`,
	`{"tasks":[{"wave":99999999999999999999}]}`,
	`{"tasks":[{"wave":"1"}]}`, // another type
	`{"tasks":[{"stale":1}]}`,
	`{"tasks":{}}`,
	`{"tasks":[]} x`, // syntax errors
	`{"tasks":[}`,
	`{"tasks":[{"id":"a",}]}`,
	`{"tasks":[{"wave":01}]}`,
	`{"tasks":[{"title":"a` + "\n" + `b"}]}`,
	`{"tasks":[{"title":"\x"}]}`,
	``,
	`null`,
	`[]`,
}

func TestPagesReadAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, in := range snagdWrites {
		if l, ok := client.ReadTaskList([]byte(in)); ok || len(l.Tasks) > 0 {
			var want api.TaskList
			if err := json.Unmarshal([]byte(in), &want); err != nil {
				t.Fatalf("json.Unmarshal(%q): %v", in, err)
			}
			if !reflect.DeepEqual(l, want) {
				t.Errorf("ReadTaskList(%q) =\n%#v\nwant (as encoding/json)\n%#v", in, l, want)
			}
			continue
		}
		h, ok := client.ReadSearchResult([]byte(in))
		if !ok {
			t.Errorf("the reader left %q to encoding/json, but snagd writes it", in)
			continue
		}
		var want api.SearchResult
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", in, err)
		}
		if !reflect.DeepEqual(h, want) {
			t.Errorf("ReadSearchResult(%q) =\n%#v\nwant (as encoding/json)\n%#v", in, h, want)
		}
	}
	for _, in := range leftToJSON {
		if _, ok := client.ReadTaskList([]byte(in)); ok {
			t.Errorf("ReadTaskList(%q) read it; it should be left to encoding/json", in)
		}
		var got, want api.TaskList
		gotErr := client.DecodeAnswer([]byte(in), &got)
		wantErr := json.Unmarshal([]byte(in), &want)
		if !reflect.DeepEqual(got, want) || (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Errorf("decodeAnswer(%q) = %#v, %v; want %#v, %v (as encoding/json)", in, got, gotErr, want, wantErr)
		}
	}
}

// FuzzPages holds the reader to encoding/json: whatever it reads, it reads
// as json.Unmarshal does.
func FuzzPages(f *testing.F) {
	for _, in := range append(snagdWrites, leftToJSON...) {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		readsAsJSON(t, "ReadTaskList", in, client.ReadTaskList)
		readsAsJSON(t, "ReadSearchResult", in, client.ReadSearchResult)
	})
}

// readsAsJSON fails t when read, named name, reads in but not as
// json.Unmarshal does.
func readsAsJSON[T any](t *testing.T, name string, in []byte, read func([]byte) (T, bool)) {
	t.Helper()
	got, ok := read(in)
	if !ok {
		return
	}
	var want T
	if err := json.Unmarshal(in, &want); err != nil {
		t.Fatalf("%s(%q) read it, but json.Unmarshal fails: %v", name, in, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s(%q) =\n%#v\nwant\n%#v", name, in, got, want)
	}
}

// TestPagesOfARealSnagd reads real snagd's answers on the sample project
// (blocked tasks, plans, suspect files, a broken file) with the reader
// itself, as encoding/json reads them.
func TestPagesOfARealSnagd(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	root := snagdtest.Sample(t)
	port := serve(t, root, home)
	tok, err := token.Read(home)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) []byte {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://127.0.0.1:"+strconv.Itoa(port)+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok.String())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, b, err)
		}
		return b
	}
	for _, path := range []string{"/tasks?all=1&limit=100", "/tasks?limit=3", "/tasks?status=resolved"} {
		b := get(path)
		got, ok := client.ReadTaskList(b)
		if !ok {
			t.Fatalf("GET %s: the reader left snagd's answer to encoding/json: %s", path, b)
		}
		var want api.TaskList
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if len(want.Tasks) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("GET %s: read\n%#v\nwant\n%#v", path, got, want)
		}
	}
	for _, q := range []string{"checkout", "nothingmatchesthis"} {
		b := get("/search?q=" + q)
		got, ok := client.ReadSearchResult(b)
		if !ok {
			t.Fatalf("search %s: the reader left snagd's answer to encoding/json: %s", q, b)
		}
		var want api.SearchResult
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("search %s: read\n%#v\nwant\n%#v", q, got, want)
		}
	}
}
