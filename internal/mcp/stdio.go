package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// lineTransport is stdio as a connection of our own, with a guard in front
// of the SDK: a line that is not a JSON-RPC message gets a JSON-RPC error
// answer and is dropped, so the server keeps serving (the SDK's stdio
// transport would close the connection).
//
// It reads each line once, into the message the SDK handles, where the SDK's
// own transport behind a guard decoded every line twice and went through a
// pipe and one more goroutine; and it writes an answer's result as the SDK
// encoded it, where the SDK's transport encodes the whole answer again (a
// page of tasks for snag_list). A batch (a JSON array) is refused, as the
// guard refused it before. Rechecked against the SDK v1.8.0, whose stdio
// transport still closes on a bad line and drops the answers in flight at
// the input's end, and measured: behind the smallest guard that kept our
// behaviour it cost a quarter to a third more of the bridge's CPU per
// snag_list (docs/decisions.md).
func lineTransport(in io.Reader, out io.Writer) sdk.Transport {
	return &lineConn{in: in, out: out, pending: map[string]bool{}, idle: make(chan struct{}, 1),
		incoming: make(chan lineMsg), closed: make(chan struct{})}
}

// lineConn is the connection lineTransport makes; it is its own transport,
// so it can be connected once.
type lineConn struct {
	in  io.Reader
	out io.Writer

	incoming chan lineMsg // from the reading goroutine
	closed   chan struct{}
	close    sync.Once
	started  sync.Once

	mu      sync.Mutex // guards out, buf, pending
	buf     []byte
	pending map[string]bool // ids of requests not answered yet
	idle    chan struct{}   // signalled when pending empties
}

type lineMsg struct {
	msg jsonrpc.Message
	err error
}

// Connect starts reading the input.
func (c *lineConn) Connect(context.Context) (sdk.Connection, error) {
	c.started.Do(func() { go c.readLines() })
	return c, nil
}

// maxLine is the longest line read: a longer one is answered as a parse
// error and dropped, as the SDK's transport bounds a frame.
const maxLine = sdk.DefaultMaxLineLength

// readLines reads the input a line at a time and hands each message on,
// until the input ends or the connection is closed.
func (c *lineConn) readLines() {
	br := bufio.NewReaderSize(c.in, 64<<10)
	for {
		line, err := readLine(br)
		if t := bytes.TrimSpace(line); len(t) > 0 {
			msg, code, id := decodeFrame(t)
			if msg == nil {
				c.reject(code, id)
			} else {
				if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
					c.mu.Lock()
					c.pending[idKey(r.ID)] = true
					c.mu.Unlock()
				}
				select {
				case c.incoming <- lineMsg{msg: msg}:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			// stdin closed: answer what was asked (printf ... | snag
			// mcp works), then end the connection.
			c.drain(5 * time.Second)
			if errors.Is(err, errLineTooLong) {
				err = io.EOF
			}
			select {
			case c.incoming <- lineMsg{err: err}:
			case <-c.closed:
			}
			return
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line, without its newline. A line longer than maxLine
// is read to its end and given back as one that is not JSON.
func readLine(br *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(long)+len(frag) > maxLine {
			long = append(long[:0], "x"...) // not JSON: answered as a parse error
		} else {
			long = append(long, frag...)
		}
		if err != bufio.ErrBufferFull {
			return long, err
		}
	}
}

// decodeFrame decodes a line into the message it carries. A line that is
// not a JSON-RPC 2.0 message gives a nil message, the error code to answer
// and the id to answer it with.
func decodeFrame(line []byte) (msg jsonrpc.Message, code int, id json.RawMessage) {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   *jsonrpc.Error  `json:"error"`
	}
	if !json.Valid(line) {
		return nil, jsonrpc.CodeParseError, nil
	}
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
		return nil, jsonrpc.CodeInvalidRequest, m.ID
	}
	var rid jsonrpc.ID
	if len(m.ID) > 0 && string(m.ID) != "null" {
		var v any
		json.Unmarshal(m.ID, &v)
		var err error
		if rid, err = jsonrpc.MakeID(v); err != nil {
			return nil, jsonrpc.CodeInvalidRequest, nil
		}
	}
	switch {
	case m.Method != nil && *m.Method != "":
		return &jsonrpc.Request{ID: rid, Method: *m.Method, Params: m.Params}, 0, nil
	case m.Method == nil && rid.IsValid() && (m.Result != nil || m.Error != nil):
		r := &jsonrpc.Response{ID: rid, Result: m.Result}
		if m.Error != nil {
			r.Error = m.Error
		}
		return r, 0, nil
	}
	return nil, jsonrpc.CodeInvalidRequest, m.ID
}

// idKey is a request id as a key of pending.
func idKey(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return strconv.Quote(v)
	}
	return ""
}

// Read gives the next message of the input.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		return m.msg, m.err
	case <-c.closed:
		return nil, io.EOF
	}
}

// Write writes a message as one line. An answer's result is written as the
// SDK encoded it (compact JSON of its own making), not encoded again.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf[:0]
	r, answer := msg.(*jsonrpc.Response)
	if answer && r.Error == nil && len(r.Result) > 0 {
		id, err := json.Marshal(r.ID.Raw())
		if err != nil {
			return err
		}
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = append(b, id...)
		b = append(b, `,"result":`...)
		b = append(b, r.Result...)
		b = append(b, '}')
	} else {
		enc, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			return err
		}
		b = append(b, enc...)
	}
	b = append(b, '\n')
	_, err := c.out.Write(b)
	if cap(b) <= 256<<10 {
		c.buf = b // kept for the next answer, unless a rare large one
	}
	if answer {
		c.answered(idKey(r.ID))
	}
	return err
}

// answered records that the request id was answered; c.mu is held.
func (c *lineConn) answered(id string) {
	if !c.pending[id] {
		return
	}
	delete(c.pending, id)
	if len(c.pending) == 0 {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// drain waits until every request was answered, or for at most d.
func (c *lineConn) drain(d time.Duration) {
	deadline := time.After(d)
	for {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-c.idle:
		case <-deadline:
			return
		case <-c.closed:
			return
		}
	}
}

// Close ends the connection; the reading goroutine stops at its next line.
func (c *lineConn) Close() error {
	c.close.Do(func() { close(c.closed) })
	return nil
}

// SessionID is "": stdio has no session id.
func (c *lineConn) SessionID() string { return "" }

// reject answers a line that is not a JSON-RPC message.
func (c *lineConn) reject(code int, id json.RawMessage) {
	msg := "Parse error: each line must be one JSON-RPC 2.0 message"
	if code == jsonrpc.CodeInvalidRequest {
		msg = "Invalid Request: want a JSON-RPC 2.0 request, notification or response"
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.Write(append(b, '\n'))
}
