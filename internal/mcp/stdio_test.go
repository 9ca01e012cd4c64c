package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestDecodeFrame: a line becomes the request or answer it is; one that is
// not a JSON-RPC 2.0 message is refused with the code to answer (parse
// error or invalid request) and the id it carried.
func TestDecodeFrame(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line       string
		want       string // "request", "notification", "answer", or "" when refused
		method, id string
		code       int
		errID      string
	}{
		{line: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"snag_list"}}`, want: "request", method: "tools/call", id: "7"},
		{line: `{"jsonrpc":"2.0","id":"a\"b","method":"ping"}`, want: "request", method: "ping", id: `"a\"b"`},
		{line: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, want: "notification", method: "notifications/initialized"},
		{line: `{"jsonrpc":"2.0","id":null,"method":"notifications/x"}`, want: "notification", method: "notifications/x"},
		{line: `{"result":{"roots":[]},"jsonrpc":"2.0","id":3}`, want: "answer", id: "3"},
		{line: `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"no"}}`, want: "answer", id: "4"},
		{line: `not json`, code: jsonrpc.CodeParseError},
		{line: `{"jsonrpc":"2.0","id":99,"method":"ping",`, code: jsonrpc.CodeParseError},
		{line: `{"jsonrpc":"1.0","id":5,"method":"ping"}`, code: jsonrpc.CodeInvalidRequest, errID: "5"},
		{line: `{"jsonrpc":"2.0","id":6,"method":""}`, code: jsonrpc.CodeInvalidRequest, errID: "6"},
		{line: `{"jsonrpc":"2.0","id":7}`, code: jsonrpc.CodeInvalidRequest, errID: "7"},
		{line: `{"jsonrpc":"2.0","result":{}}`, code: jsonrpc.CodeInvalidRequest},
		{line: `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, code: jsonrpc.CodeInvalidRequest},
		{line: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, code: jsonrpc.CodeInvalidRequest},
	} {
		msg, code, errID := decodeFrame([]byte(c.line))
		got, method, id := "", "", ""
		switch m := msg.(type) {
		case *jsonrpc.Request:
			got, method, id = "notification", m.Method, idKey(m.ID)
			if m.IsCall() {
				got = "request"
			}
		case *jsonrpc.Response:
			got, id = "answer", idKey(m.ID)
		}
		if got != c.want || method != c.method || id != c.id || code != c.code || string(errID) != c.errID {
			t.Errorf("decodeFrame(%s) = %s %q id %s, code %d id %s; want %s %q id %s, code %d id %s",
				c.line, got, method, id, code, errID, c.want, c.method, c.id, c.code, c.errID)
		}
	}
}

// TestLineConnWrite: an answer goes out as one line with the result as the
// SDK encoded it, byte for byte; a refused line is answered with the
// error and the server reads on; the end of the input ends reading.
func TestLineConnWrite(t *testing.T) {
	t.Parallel()
	in := strings.NewReader("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\nnot json\n")
	var out bytes.Buffer
	tr := lineTransport(in, &out)
	conn, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "ping" {
		t.Fatalf("read %#v, want the ping", msg)
	}
	result := json.RawMessage(`{"content":[{"type":"text","text":"a\u003cb"}],"x":[1, 2]}`)
	if err := conn.Write(ctx, &jsonrpc.Response{ID: req.ID, Result: result}); err != nil {
		t.Fatal(err)
	}
	// The end of the input comes once every request read was answered.
	if _, err := conn.Read(ctx); err != io.EOF {
		t.Fatalf("read after the last line: %v, want EOF", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	slices.Sort(lines) // the refusal and the answer are written by two goroutines
	want := []string{
		`{"error":{"code":-32700,"message":"Parse error: each line must be one JSON-RPC 2.0 message"},"id":null,"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":1,"result":` + string(result) + `}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("wrote %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, lines[i], want[i])
		}
	}
}
