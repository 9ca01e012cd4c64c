package mcp

import "testing"

// TestAnswerID: the id of an answer is found whatever the order of its
// keys; a request, a notification or a line that is not an object has none.
func TestAnswerID(t *testing.T) {
	for _, c := range []struct {
		line, id string
		ok       bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x"}]}}`, "7", true},
		{`{"jsonrpc":"2.0","id":"a\"b","error":{"code":-32601,"message":"no"}}`, `"a\"b"`, true},
		{`{"result":{"id":99,"method":"x"},"jsonrpc":"2.0","id":3}`, "3", true},
		{`{"jsonrpc":"2.0","id":4,"method":"roots/list"}`, "", false},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":1}}`, "", false},
		{`{"jsonrpc":"2.0","result":{}}`, "", false},
		{`[{"jsonrpc":"2.0","id":1,"result":{}}]`, "", false},
		{`not json`, "", false},
	} {
		id, ok := answerID([]byte(c.line))
		if ok != c.ok || string(id) != c.id {
			t.Errorf("answerID(%s) = %s, %v; want %s, %v", c.line, id, ok, c.id, c.ok)
		}
	}
}
