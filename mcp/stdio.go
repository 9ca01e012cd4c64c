package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// lineTransport is stdio with a guard in front of the SDK: a line that is
// not a JSON-RPC message gets a JSON-RPC error answer and is dropped, so
// the server keeps serving (the SDK would close the connection).
func lineTransport(in io.Reader, out io.Writer) sdk.Transport {
	w := &frameWriter{w: out, pending: map[string]bool{}, idle: make(chan struct{}, 1)}
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if t := bytes.TrimSpace(line); len(t) > 0 {
				if code, id, ok := checkFrame(t); ok {
					w.sent(t)
					if _, werr := pw.Write(append(t, '\n')); werr != nil {
						return
					}
				} else {
					w.reject(code, id)
				}
			}
			if err != nil {
				// stdin closed: answer what was asked (printf ... | snag
				// mcp works), then end the connection.
				w.drain(5 * time.Second)
				pw.Close()
				return
			}
		}
	}()
	return &sdk.IOTransport{Reader: pr, Writer: w}
}

// checkFrame says whether a line is a JSON-RPC 2.0 message; when it is not,
// the error code to answer and the id to answer it with.
func checkFrame(line []byte) (code int, id json.RawMessage, ok bool) {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if !json.Valid(line) {
		return -32700, nil, false
	}
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" || (m.Method == "" && m.Result == nil && m.Error == nil) {
		return -32600, m.ID, false
	}
	return 0, nil, true
}

// frameWriter writes whole lines only, one at a time, so the guard's
// answers never interleave with the SDK's.
type frameWriter struct {
	mu      sync.Mutex
	w       io.Writer
	buf     []byte
	pending map[string]bool // ids of requests not answered yet
	idle    chan struct{}   // signalled when pending empties
}

type idOnly struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// sent records a request the client sent.
func (f *frameWriter) sent(line []byte) {
	var m idOnly
	if json.Unmarshal(line, &m) == nil && m.Method != "" && len(m.ID) > 0 {
		f.mu.Lock()
		f.pending[string(m.ID)] = true
		f.mu.Unlock()
	}
}

// drain waits until every request was answered, or for at most d.
func (f *frameWriter) drain(d time.Duration) {
	deadline := time.After(d)
	for {
		f.mu.Lock()
		n := len(f.pending)
		f.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-f.idle:
		case <-deadline:
			return
		}
	}
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, p...)
	if i := bytes.LastIndexByte(f.buf, '\n'); i >= 0 {
		for _, l := range bytes.Split(f.buf[:i], []byte("\n")) {
			if id, ok := answerID(l); ok && f.pending[string(id)] {
				delete(f.pending, string(id))
				if len(f.pending) == 0 {
					select {
					case f.idle <- struct{}{}:
					default:
					}
				}
			}
		}
		_, err := f.w.Write(f.buf[:i+1])
		f.buf = append(f.buf[:0], f.buf[i+1:]...)
		if err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (f *frameWriter) Close() error { return nil }

// answerID gives the id of a line the SDK writes when it is an answer (it
// has an id and a result or an error, and no method). It reads the line's
// keys only as far as it must: the SDK writes jsonrpc, id, then the result
// (a whole page of tasks for snag_list), which is not read at all, where a
// decoding of the line would read it all.
func answerID(line []byte) (id json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	answer := false
	for dec.More() && (id == nil || !answer) {
		key, err := dec.Token()
		if err != nil {
			return nil, false
		}
		switch key {
		case "method":
			return nil, false // a request or a notification
		case "result", "error":
			answer = true
			if id != nil {
				return id, true
			}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if key == "id" {
			id = v
		}
	}
	return id, id != nil && answer
}

func (f *frameWriter) reject(code int, id json.RawMessage) {
	msg := "Parse error: each line must be one JSON-RPC 2.0 message"
	if code == -32600 {
		msg = "Invalid Request: want a JSON-RPC 2.0 request, notification or response"
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	f.Write(append(b, '\n'))
}
