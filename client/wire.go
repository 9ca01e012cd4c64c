package client

// The HTTP/1.1 the client speaks to snagd, on 127.0.0.1 only. It is its own
// (rather than net/http's client) because the snag command runs it once per
// process: net/http links and initialises crypto/tls, x509, HTTP/2, gzip and
// MIME, about a third of a lean command's start-up, for a plain request to
// our own daemon on loopback. It sends a request with a Content-Length body
// and reads an answer with a Content-Length, a chunked body or one that ends
// with the connection; it keeps up to maxIdle connections per port for the
// next request (the MCP bridge makes many).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snagdev/snag/api"
)

// maxIdle is how many idle connections a transport keeps per port.
const maxIdle = 4

// Limits on what an answer's head may hold: something else than snagd may
// answer on a probed port.
const (
	maxHeaderLine = 16 << 10
	maxHeaders    = 100
)

// transport makes requests to 127.0.0.1. It is safe for concurrent use.
type transport struct {
	mu   sync.Mutex
	idle map[int][]*wireConn
	// worktree, when set, is sent with every request as
	// api.WorktreeHeader: the project root the client serves, escaped.
	worktree string
}

// wireConn is one connection and the reader of its answers.
type wireConn struct {
	net.Conn
	br     *bufio.Reader
	reused bool      // it served a request before
	since  time.Time // when it went idle
}

// idleFor is how long a connection may have been idle and still be
// reused: half of snagd's idle timeout (a minute), so that snagd is not
// closing it as the request arrives.
const idleFor = 30 * time.Second

// request is one request: its method, path (with the query, escaped) and
// headers as name, value pairs. A body is sent with its Content-Length;
// timeout, when set, bounds the whole exchange, the answer's body included.
type request struct {
	method, path string
	header       []string
	body         []byte
	timeout      time.Duration
}

// response is an answer: its status code, its status line's text after
// "HTTP/1.1 " ("404 Not Found"), its headers and its body, which the
// caller closes.
type response struct {
	StatusCode int
	Status     string
	header     []string // name, value pairs as received
	Body       io.ReadCloser
	// The body's framing, from the head: chunked, or n bytes, or (n -1)
	// to the end of the connection.
	n       int64
	chunked bool
}

// Header gives the value of the answer's first header of that name (any
// case), or "".
func (r *response) Header(name string) string {
	for i := 0; i+1 < len(r.header); i += 2 {
		if strings.EqualFold(r.header[i], name) {
			return r.header[i+1]
		}
	}
	return ""
}

// errStale is a reused connection that the server had closed before the
// request reached it (snagd closes idle connections after a minute).
var errStale = errors.New("the idle connection was closed by snagd")

// aLongTimeAgo is a deadline in the past, which ends a blocked read or
// write at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip sends req to 127.0.0.1:port and reads the answer's head. A GET
// that finds its reused connection closed by snagd before any answer is
// sent again on a new one. A POST is not (snagd may have acted on it and
// then died); connections idle longer than idleFor, which snagd may be
// closing, are never reused, and one is looked at before it is. When ctx
// ends, the exchange ends too, with ctx's error.
func (t *transport) roundTrip(ctx context.Context, port int, req *request) (*response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		c, err := t.conn(ctx, port)
		if err != nil {
			return nil, err
		}
		resp, err := t.exchange(ctx, c, port, req)
		if errors.Is(err, errStale) && req.method == "GET" {
			continue // a new connection cannot be stale
		}
		return resp, err
	}
}

// conn gives an idle connection to port that is still open, or a new one.
func (t *transport) conn(ctx context.Context, port int) (*wireConn, error) {
	for {
		t.mu.Lock()
		list := t.idle[port]
		var c *wireConn
		if n := len(list); n > 0 {
			c = list[n-1]
			t.idle[port] = list[:n-1]
		}
		t.mu.Unlock()
		if c == nil {
			break
		}
		if time.Since(c.since) < idleFor && open(c) {
			c.reused = true
			return c, nil
		}
		c.Close()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return &wireConn{Conn: nc, br: bufio.NewReaderSize(nc, 16<<10)}, nil
}

// put keeps c for the next request to port, or closes it when enough are
// kept.
func (t *transport) put(port int, c *wireConn) {
	if c.SetDeadline(time.Time{}) != nil {
		c.Close()
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = map[int][]*wireConn{}
	}
	if len(t.idle[port]) >= maxIdle {
		c.Close()
		return
	}
	c.since = time.Now()
	t.idle[port] = append(t.idle[port], c)
}

// closeIdle closes every idle connection.
func (t *transport) closeIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for port, list := range t.idle {
		for _, c := range list {
			c.Close()
		}
		delete(t.idle, port)
	}
}

// exchange writes req on c and reads the answer's head. c is closed on
// every error and when the answer's body is done, unless it can serve
// another request, when it goes back to t.
func (t *transport) exchange(ctx context.Context, c *wireConn, port int, req *request) (*response, error) {
	var deadline time.Time
	if req.timeout > 0 {
		deadline = time.Now().Add(req.timeout)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	if err := c.SetDeadline(deadline); err != nil {
		c.Close()
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
	fail := func(err error, answered bool) (*response, error) {
		stop()
		c.Close()
		switch {
		case ctxEnded(ctx, err):
			return nil, ctx.Err()
		case c.reused && !answered && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err)):
			return nil, errStale
		case isTimeout(err) && req.timeout > 0:
			return nil, fmt.Errorf("%s %s: no answer within %s: %w", req.method, req.path, req.timeout, err)
		}
		return nil, err
	}
	if _, err := c.Write(head(req, port, t.worktree)); err != nil {
		return fail(err, false)
	}
	resp, keep, err := readHead(c.br, req.method)
	if err != nil {
		return fail(err, resp != nil)
	}
	b := &body{ctx: ctx, t: t, c: c, port: port, keep: keep, stop: stop}
	switch {
	case resp.chunked:
		b.r = &chunkedReader{r: c.br}
	case resp.n >= 0:
		b.r = &fixedReader{r: c.br, n: resp.n}
		b.eof = resp.n == 0
	default:
		b.r = c.br // to the end of the connection
		b.keep = false
	}
	resp.Body = b
	return resp, nil
}

// head is req's request line, headers and body, as they are written.
func head(req *request, port int, worktree string) []byte {
	var w bytes.Buffer
	w.Grow(256 + len(req.body))
	w.WriteString(req.method)
	w.WriteByte(' ')
	w.WriteString(req.path)
	w.WriteString(" HTTP/1.1\r\nHost: 127.0.0.1:")
	w.WriteString(strconv.Itoa(port))
	w.WriteString("\r\n")
	if worktree != "" {
		w.WriteString(api.WorktreeHeader)
		w.WriteString(": ")
		w.WriteString(worktree)
		w.WriteString("\r\n")
	}
	for i := 0; i+1 < len(req.header); i += 2 {
		w.WriteString(req.header[i])
		w.WriteString(": ")
		w.WriteString(req.header[i+1])
		w.WriteString("\r\n")
	}
	if req.body != nil || req.method == "POST" || req.method == "PUT" {
		w.WriteString("Content-Length: ")
		w.WriteString(strconv.Itoa(len(req.body)))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	w.Write(req.body)
	return w.Bytes()
}

// readHead reads an answer's status line and headers, skipping any 1xx
// answer before it. keep says whether the connection may carry another
// request once the body is read. On an error after the status line, the
// response is not nil (the server answered something).
func readHead(br *bufio.Reader, method string) (resp *response, keep bool, err error) {
	for {
		line, err := readLine(br)
		if err != nil {
			return nil, false, err
		}
		proto, status, ok := strings.Cut(line, " ")
		code, codeErr := strconv.Atoi(status[:min(3, len(status))])
		if !ok || !strings.HasPrefix(proto, "HTTP/1.") || len(status) < 3 || codeErr != nil || code < 100 || code > 999 {
			return nil, false, fmt.Errorf("not an HTTP/1.1 answer: %q", truncate(line, 64))
		}
		resp = &response{StatusCode: code, Status: status}
		for {
			line, err := readLine(br)
			if err != nil {
				return resp, false, fmt.Errorf("read the answer's headers: %w", err)
			}
			if line == "" {
				break
			}
			name, value, ok := strings.Cut(line, ":")
			if !ok || name == "" || strings.ContainsAny(name, " \t") {
				return resp, false, fmt.Errorf("malformed header line in the answer: %q", truncate(line, 64))
			}
			if len(resp.header) >= 2*maxHeaders {
				return resp, false, errors.New("the answer has too many headers")
			}
			resp.header = append(resp.header, name, strings.TrimSpace(value))
		}
		if code >= 200 || code == 101 {
			break
		}
	}
	if resp.n, resp.chunked, err = resp.framing(); err != nil {
		return resp, false, err
	}
	if method == "HEAD" || resp.StatusCode == 204 || resp.StatusCode == 304 {
		resp.n, resp.chunked = 0, false // no body, whatever the head says
	}
	keep = !hasToken(resp.Header("Connection"), "close") && resp.StatusCode != 101
	return resp, keep, nil
}

// framing reads the body's length, or chunked, or -1 (to the connection's
// end) from Transfer-Encoding and Content-Length; an answer with another
// coding, or a Content-Length that is not one number, is refused (RFC 9112
// section 6.3).
func (r *response) framing() (n int64, chunked bool, err error) {
	if te := r.Header("Transfer-Encoding"); te != "" {
		if !strings.EqualFold(strings.TrimSpace(te), "chunked") {
			return 0, false, fmt.Errorf("the answer's Transfer-Encoding %q is not chunked", te)
		}
		return -1, true, nil
	}
	n = -1
	for i := 0; i+1 < len(r.header); i += 2 {
		if !strings.EqualFold(r.header[i], "Content-Length") {
			continue
		}
		v, err := strconv.ParseInt(r.header[i+1], 10, 64)
		if err != nil || v < 0 || n >= 0 && v != n {
			return 0, false, fmt.Errorf("the answer's Content-Length %q is not a length", r.header[i+1])
		}
		n = v
	}
	return n, false, nil
}

// readLine reads one line of an answer's head, without its CRLF (or LF).
func readLine(br *bufio.Reader) (string, error) {
	b, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", fmt.Errorf("a line of the answer's head is longer than %d bytes", maxHeaderLine)
	}
	if err != nil {
		if err == io.EOF && len(b) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	b = bytes.TrimSuffix(b[:len(b)-1], []byte{'\r'})
	return string(b), nil
}

// hasToken reports whether a comma-separated header value holds token.
func hasToken(v, token string) bool {
	for part := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.TrimSpace(part), token) {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// ctxEnded reports whether the I/O error err is ctx's doing: it ended, or
// its deadline, which is the connection's, passed (the connection may
// notice before the context does, and the context's error then follows).
func ctxEnded(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	if d, ok := ctx.Deadline(); ok && isTimeout(err) && !time.Now().Before(d) {
		<-ctx.Done()
		return true
	}
	return false
}

// isReset reports whether err is the peer's reset or a write to a
// connection it closed.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// body is an answer's body. Once it is read to its end, its connection goes
// back to the transport (when the answer allows); closed before, it is
// read on for a little (an error's JSON leaves its newline) and otherwise
// closed.
type body struct {
	ctx    context.Context
	r      io.Reader
	t      *transport
	c      *wireConn
	port   int
	keep   bool
	stop   func() bool // ends the watch of the request's context
	eof    bool
	closed bool
	err    error
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("read of a closed answer body")
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof = true
	} else if err != nil && ctxEnded(b.ctx, err) {
		err = b.ctx.Err() // the context's end, not the deadline it set
	}
	if err != nil {
		b.err = err
	}
	return n, err
}

func (b *body) Close() error {
	if b.closed {
		return nil
	}
	if !b.eof && b.keep && b.err == nil {
		// A small rest (the newline after an error's JSON) is read, so
		// that the connection serves again.
		if n, err := io.CopyN(io.Discard, b.r, 4<<10); n < 4<<10 && err == io.EOF {
			b.eof = true
		}
	}
	b.closed = true
	stopped := b.stop()
	if b.eof && b.keep && stopped {
		b.t.put(b.port, b.c)
		return nil
	}
	return b.c.Close()
}

// fixedReader reads a body of n bytes.
type fixedReader struct {
	r *bufio.Reader
	n int64
}

func (f *fixedReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= int64(n)
	if err == io.EOF {
		if f.n > 0 {
			return n, io.ErrUnexpectedEOF
		}
		err = nil
	}
	return n, err
}

// chunkedReader reads a chunked body (RFC 9112 section 7.1): chunks of a
// hexadecimal size line and that many bytes each, until a chunk of size
// 0 and the trailer's lines, which are read and dropped.
type chunkedReader struct {
	r       *bufio.Reader
	n       int64 // bytes left in this chunk
	started bool
	err     error
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	for c.n == 0 && c.err == nil {
		c.err = c.next()
	}
	if c.err != nil {
		return 0, c.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// next reads the end of the chunk before, then the next chunk's size line
// (and at the last chunk, the trailer): io.EOF after the last.
func (c *chunkedReader) next() error {
	if c.started {
		line, err := readLine(c.r)
		if err != nil {
			return unexpected(err)
		}
		if line != "" {
			return errors.New("malformed chunked body: no line end after a chunk")
		}
	}
	c.started = true
	line, err := readLine(c.r)
	if err != nil {
		return unexpected(err)
	}
	size, _, _ := strings.Cut(line, ";") // chunk extensions are ignored
	size = strings.TrimSpace(size)
	n, err := strconv.ParseUint(size, 16, 63)
	if err != nil || size == "" {
		return fmt.Errorf("malformed chunked body: chunk size %q", truncate(line, 32))
	}
	if n == 0 {
		for {
			line, err := readLine(c.r)
			if err != nil {
				return unexpected(err)
			}
			if line == "" {
				return io.EOF
			}
		}
	}
	c.n = int64(n)
	return nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// The statuses the client tells apart.
const (
	statusUnauthorized = 401
	statusNotFound     = 404
	statusGone         = 410
	statusUnavailable  = 503
)

// requestTimeout bounds a call's whole exchange with snagd; the streams
// have none.
const requestTimeout = 30 * time.Second
