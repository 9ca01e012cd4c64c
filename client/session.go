package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/api"
)

// Session is a registered agent session, as POST /sessions answers it.
type Session = api.Session

// Registration is what an agent tells snagd about itself when it registers.
type Registration = api.Registration

// Register registers an agent session (POST /sessions).
func (c *Client) Register(ctx context.Context, r Registration) (Session, error) {
	var s Session
	err := c.send(ctx, 0, "", "", "POST", "/sessions", r, &s)
	return s, err
}

// header is a request's header: the token, the content type of a body,
// and an agent's session, tool call and handle, each when there is one.
func (c *Client) header(body bool, session int64, tool, handle string) []string {
	h := []string{"Authorization", "Bearer " + c.tok.String()}
	if body {
		h = append(h, "Content-Type", "application/json")
	}
	if session != 0 {
		h = append(h, api.SessionHeader, strconv.FormatInt(session, 10))
		if tool != "" {
			h = append(h, api.ToolHeader, tool)
		}
	}
	if handle != "" {
		h = append(h, api.HandleHeader, handle)
	}
	return h
}

// send sends a request with the token and decodes a JSON answer into out
// (when out is not nil). For an agent's tool call it carries the session
// (X-Snag-Session) and the tool's name (X-Snag-Tool) so snagd acts for the
// session and audits the call, and the handle it names (X-Snag-Handle); a
// session of 0, an empty tool or handle is not sent. A 503 with Retry-After (snagd starting, or its index busy:
// nothing was done) is sent again after the wait, for up to ReadyWait; a
// 503 without it (no browser to verify with) and every other non-2xx
// answer come back as *Error.
func (c *Client) send(ctx context.Context, session int64, tool, handle, method, path string, in, out any) error {
	var raw []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		raw = b
	}
	deadline := time.Now().Add(ReadyWait)
	for {
		h, quick := c.state()
		req := &request{method: method, path: path, body: raw, timeout: requestTimeout,
			header: c.header(raw != nil, session, tool, handle)}
		resp, err := c.wire.roundTrip(ctx, h.Port, req)
		if quick && ctx.Err() == nil && (err != nil || resp.StatusCode == statusUnauthorized || resp.StatusCode == statusUnavailable) {
			// The daemon the lock named is not one that serves yet: find
			// it as discovery does, and send the request again.
			if err == nil {
				resp.Body.Close()
			}
			if err := c.unquick(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("snagd on :%d: %w", h.Port, err)
		}
		if session != 0 {
			c.notice.Store(resp.Header(api.CoordHeader))
		}
		wait := retryAfter(resp)
		if retryLater(resp) && resp.Header(api.CoordHeader) == "" && !time.Now().Add(wait).After(deadline) {
			resp.Body.Close()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return errorOf(resp)
		}
		if out == nil {
			return nil
		}
		buf := bodies.Get().(*[]byte)
		defer bodies.Put(buf)
		b, err := readBody(resp.Body, (*buf)[:0])
		if cap(b) <= 1<<20 {
			*buf = b // the next answer reads into it (Unmarshal copies what it keeps)
		}
		if err != nil {
			return fmt.Errorf("snagd on :%d: read the answer: %w", h.Port, err)
		}
		return decodeAnswer(b, out)
	}
}

// bodies are the buffers answers are read into, 64 KiB at first: a
// json.Decoder grows its own from 512 bytes, copying as it goes, which for
// a page of tasks was an eighth of the page faults of a snag list; the
// bridge reuses them.
var bodies = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// readBody reads a whole answer, appending to b.
func readBody(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// Stream opens the session's stream (GET /sessions/{id}/stream) and holds
// it until ctx ends or the daemon closes it; it returns then. While the
// stream is open snagd keeps the session's leases; when it closes and does
// not come back within snagd's grace, they are released. opened, when not
// nil, is called once the daemon has accepted the stream.
func (c *Client) Stream(ctx context.Context, session int64, opened func()) error {
	resp, err := c.openStream(ctx, "/sessions/"+strconv.FormatInt(session, 10)+"/stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if opened != nil {
		opened()
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("session stream closed: %w", err)
}

// Root is the project root the client serves, symlinks resolved.
func (c *Client) Root() string { return c.root }

// Event is one event of snagd's stream (GET /events): its type (task,
// lease, verify, rescan, problem, session, or resync when events were
// missed) and its JSON data.
type Event = api.Event

// Events follows snagd's event stream from now, calling on for each event,
// until ctx ends or the stream closes; it returns then (the caller opens
// it again, with Recheck when snagd went away).
func (c *Client) Events(ctx context.Context, on func(Event)) error {
	resp, err := c.openStream(ctx, "/events")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev Event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Type != "" {
				on(ev)
			}
			ev = Event{}
		case strings.HasPrefix(line, "id: "):
			ev.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			ev.Type = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = json.RawMessage(line[6:])
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream closed: %w", err)
	}
	return fmt.Errorf("event stream closed: %w", io.ErrUnexpectedEOF)
}

// openStream opens one of snagd's long-lived GET streams at path, with no
// timeout. It returns the response to read from, or snagd's error when the
// stream was refused; the caller closes the body.
func (c *Client) openStream(ctx context.Context, path string) (*response, error) {
	h, _ := c.state()
	req := &request{method: "GET", path: path, header: []string{"Authorization", "Bearer " + c.tok.String()}} // no timeout: the stream lasts
	resp, err := c.wire.roundTrip(ctx, h.Port, req)
	if err != nil {
		return nil, fmt.Errorf("snagd on :%d: %w", h.Port, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, errorOf(resp)
	}
	return resp, nil
}

// errorOf reads a non-2xx answer's body (an api.Error) as an *Error.
func errorOf(resp *response) *Error {
	var body api.Error
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil || body.Message == "" {
		body.Message = fmt.Sprintf("snagd answered %s", resp.Status)
	}
	return &Error{Status: resp.StatusCode, Code: body.Code, Message: body.Message}
}
