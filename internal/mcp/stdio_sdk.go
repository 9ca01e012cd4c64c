package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkStdio is the SDK's IOTransport with two guards: a filter in front of
// its input answers a line that is not a JSON-RPC 2.0 message and drops
// it (the SDK would close the connection), and its connection holds back
// the end of the input until every request read was answered (at most
// 5 s), so printf ... | snag mcp gets its answers.
func sdkStdio(in io.Reader, out io.Writer) sdk.Transport {
	w := &lockedWriter{w: out}
	f := &lineFilter{br: bufio.NewReaderSize(in, 64<<10), out: w}
	return &drainTransport{inner: &sdk.IOTransport{Reader: io.NopCloser(f), Writer: nopCloser{w}, MaxLineLength: -1}}
}

// lockedWriter serializes the SDK's writes and the filter's refusals.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// lineFilter hands the SDK's decoder the lines of its input that are
// JSON-RPC 2.0 messages, one at a time, and answers the others.
type lineFilter struct {
	br   *bufio.Reader
	out  io.Writer
	next []byte // the rest of the line being handed on
	err  error  // the input's end, given once next is handed on
}

// Read gives the next good line, with its newline.
func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.next) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, err := readLine(f.br)
		f.err = err
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		if msg, code, id := decodeFrame(t); msg == nil {
			rejectLine(f.out, code, id)
			continue
		}
		f.next = append(t, '\n')
	}
	n := copy(p, f.next)
	f.next = f.next[n:]
	return n, nil
}

// rejectLine answers a line that is not a JSON-RPC message.
func rejectLine(out io.Writer, code int, id json.RawMessage) {
	msg := "Parse error: each line must be one JSON-RPC 2.0 message"
	if code == jsonrpc.CodeInvalidRequest {
		msg = "Invalid Request: want a JSON-RPC 2.0 request, notification or response"
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	out.Write(append(b, '\n'))
}

// drainTransport wraps a transport's connection in a drainConn.
type drainTransport struct{ inner sdk.Transport }

// Connect connects the inner transport.
func (t *drainTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainConn{Connection: c, pending: map[jsonrpc.ID]bool{}, idle: make(chan struct{}, 1), closed: make(chan struct{})}, nil
}

// drainConn is a connection whose input's end is held back until every
// request read was answered, or 5 s passed: the SDK cancels the requests
// in flight when its input ends.
type drainConn struct {
	sdk.Connection
	mu      sync.Mutex
	pending map[jsonrpc.ID]bool // requests not answered yet
	idle    chan struct{}       // signalled when pending empties
	closed  chan struct{}
	close   sync.Once
}

// Read gives the next message; at the input's end, it first waits for the
// answers.
func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.drain(5 * time.Second)
		}
		return nil, err
	}
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
		c.mu.Lock()
		c.pending[r.ID] = true
		c.mu.Unlock()
	}
	return msg, nil
}

// Write writes a message and records an answer.
func (c *drainConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if r, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		if c.pending[r.ID] {
			delete(c.pending, r.ID)
			if len(c.pending) == 0 {
				select {
				case c.idle <- struct{}{}:
				default:
				}
			}
		}
		c.mu.Unlock()
	}
	return err
}

// drain waits until every request was answered, or for at most d.
func (c *drainConn) drain(d time.Duration) {
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

// Close closes the connection.
func (c *drainConn) Close() error {
	c.close.Do(func() { close(c.closed) })
	return c.Connection.Close()
}
