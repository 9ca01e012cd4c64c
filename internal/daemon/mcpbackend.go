package daemon

import (
	"context"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/mcp"
	"github.com/snagdev/snag/internal/snag"
)

// engineLink is the mcp.Link of one MCP session over /mcp: its tools'
// operations run on snagd's service in process (d.svc), which admits,
// runs and audits each as the stdio bridge's arrive over HTTP. It
// registers a snag session for the MCP client on first use (transport
// http), holds it open as a session stream would until Close (then the
// engine ends it after the grace), and marks it seen as its tools are
// called. It is safe for concurrent use.
type engineLink struct {
	d    *Daemon
	cred string // the credential of the request that made the MCP session

	mu      sync.Mutex
	client  string
	version string
	session int64
	open    bool      // the session's stream is held open
	touched time.Time // when the session was last marked seen
	closed  bool      // Close was called: no new session is registered

	life    context.Context // ends at Close: Watch returns
	endLife context.CancelFunc
}

func newEngineLink(d *Daemon, cred string) *engineLink {
	life, end := context.WithCancel(context.Background())
	return &engineLink{d: d, cred: cred, life: life, endLife: end}
}

// Cred names the credential the MCP session was made with.
func (l *engineLink) Cred() string { return l.cred }

// Do runs an operation on snagd's service in process.
func (l *engineLink) Do(ctx context.Context, op string, req any) (any, error) {
	return l.d.svc.Do(ctx, op, req)
}

// Notice is what every tool result says while snagd cannot reach its
// coordination store (engine.CoordNotice); "" while all is well.
func (l *engineLink) Notice(ctx context.Context) string {
	id := l.SessionID()
	if id == 0 {
		return ""
	}
	return l.d.e.CoordNotice(ctx, id)
}

// SetClient records the MCP client's name and version for the session.
func (l *engineLink) SetClient(name, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.client, l.version = name, version
}

// Session is the link's session, registered (and held open) when it has
// none; it marks the session seen, as a session stream does every few
// seconds: at most once per touchEvery.
func (l *engineLink) Session(ctx context.Context, _ string) (int64, error) {
	l.mu.Lock()
	id, due := l.session, time.Since(l.touched) >= touchEvery
	if id != 0 && due {
		l.touched = time.Now()
	}
	l.mu.Unlock()
	if id != 0 {
		if due {
			l.d.e.Touch(ctx, id)
		}
		return id, nil
	}
	return l.register(ctx)
}

// register registers the link's session, when it still has none, and
// holds it open.
func (l *engineLink) register(ctx context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session == 0 {
		if l.closed {
			return 0, &apiError{Status: http.StatusGone, Code: "session_ended", Message: "this MCP session has ended: start a new one"}
		}
		client := l.client
		if client == "" {
			client = "mcp"
		}
		s, err := l.d.e.Register(ctx, index.Session{Client: client, ClientVersion: l.version, PID: os.Getpid(), Transport: "http"})
		if err != nil {
			return 0, l.d.answer(err)
		}
		l.session, l.open, l.touched = s.ID, true, time.Now()
		l.d.w.Sessions.StreamOpened(s.ID)
	}
	return l.session, nil
}

// touchEvery is how often a session of /mcp is marked seen while it calls
// tools, as often as a session stream's keep-alive.
const touchEvery = 5 * time.Second

// SessionID is the id of the snag session the link holds, or 0.
func (l *engineLink) SessionID() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.session
}

// Ended lets session id go, which the service answered has ended (a
// person ended it, say): the next Session registers another.
func (l *engineLink) Ended(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session != id {
		return
	}
	if l.open {
		l.d.w.Sessions.StreamClosed(id)
		l.open = false
	}
	l.session = 0
}

// Close lets the session go: the engine ends it, and gives its tasks
// back, after the grace. Watch calls return.
func (l *engineLink) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.endLife()
	if l.open {
		l.d.w.Sessions.StreamClosed(l.session)
		l.open = false
	}
	return nil
}

// Watch calls on with the key of each task an event of the engine names,
// or "" when many may have changed, until ctx ends or the link closes.
func (l *engineLink) Watch(ctx context.Context, on func(key string)) { l.d.watch(ctx, l.life, on) }

// watch calls on with the key of each task an event of the engine names,
// or "" when many may have changed, until ctx or life ends.
func (d *Daemon) watch(ctx, life context.Context, on func(key string)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(life, cancel)
	defer stop()
	hub := d.e.Events()
	from := hub.Last()
	for {
		events, wait, gap := hub.Since(from)
		if gap {
			on("")
		}
		for _, ev := range events {
			from = ev.ID
			if ev.Type == "session" {
				continue
			}
			on(snag.TaskOf(ev.Data))
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		}
	}
}

var _ mcp.Link = (*engineLink)(nil)
