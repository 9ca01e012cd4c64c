package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// listen gives a loopback listener and its port.
func listen(t *testing.T) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// serveHTTP runs a net/http server on loopback and counts its connections.
func serveHTTP(t *testing.T, h http.HandlerFunc, conf func(*http.Server)) (port int, conns *atomic.Int32) {
	t.Helper()
	ln, port := listen(t)
	conns = new(atomic.Int32)
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	if conf != nil {
		conf(srv)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return port, conns
}

// serveRaw answers each connection's requests with what answer writes,
// for answers net/http's server would not send.
func serveRaw(t *testing.T, answer func(c net.Conn, br *bufio.Reader)) int {
	t.Helper()
	ln, port := listen(t)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				answer(c, bufio.NewReader(c))
			}()
		}
	}()
	return port
}

// readRequest reads one request's head and its Content-Length body.
func readRequest(br *bufio.Reader) (head string, body []byte, err error) {
	var n int
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return head, nil, err
		}
		if line == "\r\n" {
			break
		}
		head += line
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	body = make([]byte, n)
	_, err = io.ReadFull(br, body)
	return head, body, err
}

func get(t *testing.T, tr *transport, port int, req *request) (*response, []byte, error) {
	t.Helper()
	resp, err := tr.roundTrip(context.Background(), port, req)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, err
}

// TestWireBodies: an answer with a Content-Length and a chunked one (net/http's
// server chunks what it does not buffer whole) come out byte for byte, and the
// request carries its headers, its body and its length.
func TestWireBodies(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16+7)
	port, _ := serveHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/small":
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Header().Set("X-Token", r.Header.Get("Authorization"))
			w.Header().Set("X-Length", strconv.FormatInt(r.ContentLength, 10))
			w.Header().Set("X-Query", r.URL.RawQuery)
			w.Write(b)
		case "/big":
			w.Write(big[:len(big)/2])
			w.(http.Flusher).Flush()
			w.Write(big[len(big)/2:])
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	}, nil)
	var tr transport
	resp, b, err := get(t, &tr, port, &request{method: "POST", path: "/small?a=b%20c", body: []byte(`{"x":1}`),
		header: []string{"Authorization", "Bearer tok"}})
	if err != nil || string(b) != `{"x":1}` || resp.StatusCode != 200 || resp.Status != "200 OK" {
		t.Fatalf("small: %v %q %+v", err, b, resp)
	}
	if resp.Header("x-token") != "Bearer tok" || resp.Header("X-Length") != "7" || resp.Header("X-Query") != "a=b%20c" {
		t.Errorf("the request's head as the server read it: %v", resp.header)
	}
	resp, b, err = get(t, &tr, port, &request{method: "GET", path: "/big"})
	if err != nil || !bytes.Equal(b, big) {
		t.Fatalf("big: %v, %d bytes (want %d)", err, len(b), len(big))
	}
	if resp.Header("Transfer-Encoding") != "chunked" {
		t.Errorf("the big answer was not chunked (%v): the test does not test chunks", resp.header)
	}
	if resp, b, err = get(t, &tr, port, &request{method: "POST", path: "/empty"}); err != nil || len(b) != 0 || resp.StatusCode != 204 {
		t.Fatalf("empty: %v %q %+v", err, b, resp)
	}
}

// TestWireKeepsConnections: requests in turn share one connection; one that
// snagd closed while idle is noticed and a new one made; an answer that says
// Connection: close is not reused.
func TestWireKeepsConnections(t *testing.T) {
	t.Parallel()
	port, conns := serveHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, r.URL.Path)
	}, nil)
	var tr transport
	for i := range 5 {
		if _, b, err := get(t, &tr, port, &request{method: "GET", path: "/a"}); err != nil || string(b) != "/a" {
			t.Fatalf("request %d: %v %q", i, err, b)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 requests in turn made %d connections, want 1", n)
	}
	get(t, &tr, port, &request{method: "GET", path: "/close"})
	get(t, &tr, port, &request{method: "GET", path: "/a"})
	if n := conns.Load(); n != 2 {
		t.Errorf("after a Connection: close, %d connections, want 2", n)
	}

	// A server whose idle connections close at once: every request finds
	// its kept connection closed, and makes a new one without an error.
	var closed atomic.Int32
	port, conns = serveHTTP(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") },
		func(s *http.Server) {
			s.IdleTimeout = time.Millisecond
			counted := s.ConnState
			s.ConnState = func(c net.Conn, st http.ConnState) {
				counted(c, st)
				if st == http.StateClosed {
					closed.Add(1)
				}
			}
		})
	tr = transport{}
	for i := range 3 {
		for deadline := time.Now().Add(10 * time.Second); closed.Load() < int32(i) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // until the server closed the idle connection
		}
		if _, b, err := get(t, &tr, port, &request{method: "POST", path: "/", body: []byte("x")}); err != nil || string(b) != "ok" {
			t.Fatalf("request %d after the server closed the idle connection: %v %q", i, err, b)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (each idle one closed by the server)", n)
	}
}

// TestWireStaleConnectionIsRetriedOnce: a GET whose kept connection the
// server closed without answering is sent again on a new one; a POST is
// not (the server may have acted on it), and its error says what happened.
func TestWireStaleConnectionIsRetriedOnce(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	port := serveRaw(t, func(c net.Conn, br *bufio.Reader) {
		if _, _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if n.Add(1) == 1 {
			// The first connection: the next request arrives, and the
			// server closes without a word, as snagd's idle timeout may
			// just when a request is sent.
			readRequest(br)
		}
	})
	var tr transport
	for i := range 2 {
		if _, b, err := get(t, &tr, port, &request{method: "GET", path: "/"}); err != nil || string(b) != "ok" {
			t.Fatalf("request %d: %v %q", i, err, b)
		}
	}
	n.Store(0)
	tr.closeIdle()
	get(t, &tr, port, &request{method: "POST", path: "/"})
	if _, _, err := get(t, &tr, port, &request{method: "POST", path: "/"}); !errors.Is(err, errStale) {
		t.Errorf("a POST on a connection the server closed: %v, want errStale", err)
	}
}

// TestWireRawAnswers: chunk extensions and trailers, a body to the end of
// the connection, 1xx answers, and every malformed answer is an error,
// never a short body taken for a whole one.
func TestWireRawAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, answer, want, err string
	}{
		{"chunks", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n", "hello world", ""},
		{"upper-case hex", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n", "0123456789", ""},
		{"to the end", "HTTP/1.1 200 OK\r\n\r\nall of it", "all of it", ""},
		{"1xx first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", ""},
		{"LF only", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", "ok", ""},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "", "unexpected EOF"},
		{"cut chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort", "", "unexpected EOF"},
		{"no last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n", "", "unexpected EOF"},
		{"bad size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n", "", "chunk size"},
		{"no CRLF after a chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n", "", "no line end"},
		{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "", "is not chunked"},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", "", "not a length"},
		{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "", "not a length"},
		{"not HTTP", "SSH-2.0-OpenSSH_9.2\r\n", "", "not an HTTP/1.1 answer"},
		{"bad header", "HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "", "malformed header"},
		{"huge line", "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("x", 20<<10) + "\r\n\r\n", "", "longer than"},
		{"nothing", "", "", "EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := serveRaw(t, func(conn net.Conn, br *bufio.Reader) {
				readRequest(br)
				io.WriteString(conn, c.answer)
			})
			var tr transport
			_, b, err := get(t, &tr, port, &request{method: "GET", path: "/"})
			if c.err == "" && (err != nil || string(b) != c.want) {
				t.Errorf("got %q, %v; want %q", b, err, c.want)
			}
			if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("got %q, %v; want an error with %q", b, err, c.err)
			}
		})
	}
}

// TestWireContextAndTimeout: a stream ends with its context's error when the
// context ends; a request's timeout ends an exchange the server never
// answers, and the error says so.
func TestWireContextAndTimeout(t *testing.T) {
	t.Parallel()
	port := serveRaw(t, func(c net.Conn, br *bufio.Reader) {
		head, _, _ := readRequest(br)
		if strings.HasPrefix(head, "GET /stream ") {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhi\n\r\n")
		}
		io.Copy(io.Discard, br) // and never more
	})
	var tr transport
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := tr.roundTrip(ctx, port, &request{method: "GET", path: "/stream"})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "hi\n" || err != nil {
		t.Fatalf("first event: %q %v", line, err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("read of a stream whose context ended: %v, want context.Canceled", err)
	}
	resp.Body.Close()

	_, err = tr.roundTrip(context.Background(), port, &request{method: "GET", path: "/silent", timeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Errorf("a request the server never answers: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := tr.roundTrip(ctx, port, &request{method: "GET", path: "/silent"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a request whose context passes its deadline: %v", err)
	}
}

// TestWireErrorStatus: errorOf words an answer without snagd's JSON error by
// its status line.
func TestWireErrorStatus(t *testing.T) {
	t.Parallel()
	port := serveRaw(t, func(c net.Conn, br *bufio.Reader) {
		readRequest(br)
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\noops")
	})
	var tr transport
	resp, err := tr.roundTrip(context.Background(), port, &request{method: "GET", path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if e := errorOf(resp); e.Status != 502 || e.Message != "snagd answered 502 Bad Gateway" {
		t.Errorf("errorOf: %+v", e)
	}
}
