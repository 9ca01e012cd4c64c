// Package remote is the stdio bridge's [mcp.Link] to snagd, through the
// client package: it runs snagd's operations over HTTP (client.Caller),
// registers the bridge's session, holds the session stream for the
// bridge's whole life, and finds snagd again across its restarts. The mcp
// package knows only its interface; cli wires the two. It must not import
// index, project, cli, watch, SQLite or fsnotify.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/internal/mcp"
	"github.com/snagdev/snag/internal/ops"
)

// Link is the bridge's link to snagd. It registers the bridge's session on
// first use and holds the session stream for its whole life (so snagd
// releases its leases when the bridge is gone). It is safe for concurrent
// use.
type Link struct {
	cl  *client.Client
	log *slog.Logger

	mu      sync.Mutex
	reg     client.Registration
	session client.Session
	opened  chan struct{} // closed when the first stream opens
	cancel  context.CancelFunc
	done    chan struct{}

	life    context.Context // ends at Close: Watch returns
	endLife context.CancelFunc
}

// NewLink returns the link over a connected client.
func NewLink(cl *client.Client, log *slog.Logger) *Link {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	life, end := context.WithCancel(context.Background())
	return &Link{cl: cl, log: log, opened: make(chan struct{}), life: life, endLife: end}
}

// New returns the bridge's live backend over a connected client: its tool
// calls are snagd's operations over HTTP, for a session registered with
// root, the project root the bridge works in.
func New(cl *client.Client, root string, log *slog.Logger) *mcp.Daemon {
	l := NewLink(cl, log)
	l.SetRoot(root)
	return mcp.NewDaemon(l)
}

// SetRoot records the project root the bridge works in, for the session:
// when it is another worktree of the daemon's repository, verify commands
// run there.
func (l *Link) SetRoot(root string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reg.Root = root
}

// Notice is what snagd's last answer said of its coordination store (see
// mcp.Noticer): "" while all is well.
func (l *Link) Notice(context.Context) string { return l.cl.Notice() }

// SetClient records the MCP client's name and version for the session; a
// session already registered is not changed.
func (l *Link) SetClient(name, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reg.Client, l.reg.ClientVersion = name, version
}

// Session registers the bridge's session when it has none yet and starts
// holding its stream; it returns the session's id.
func (l *Link) Session(ctx context.Context, _ string) (int64, error) {
	l.mu.Lock()
	if l.session.ID != 0 {
		defer l.mu.Unlock()
		return l.session.ID, nil
	}
	reg := l.reg
	reg.PID, reg.Transport = os.Getpid(), "stdio"
	if reg.Client == "" {
		reg.Client = "mcp"
	}
	if n := os.Getenv("SNAG_AGENT"); n != "" {
		reg.Name = n
	}
	s, err := l.cl.Register(ctx, reg)
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	l.session = s
	first := l.done == nil
	if first {
		sctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done = cancel, make(chan struct{})
		go l.hold(sctx)
	}
	l.mu.Unlock()
	if first { // wait a moment for the stream, so a lease is never held without it
		select {
		case <-l.opened:
		case <-time.After(2 * time.Second):
		}
	}
	return s.ID, nil
}

// SessionID is the id of the snag session the link holds, or 0 before
// it has registered one.
func (l *Link) SessionID() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.session.ID
}

// Ended forgets session id, which snagd answered has ended: the next
// Session registers again.
func (l *Link) Ended(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session.ID == id {
		l.session = client.Session{}
	}
}

// Cred is "": snagd reads the credential of the bridge's requests itself.
func (l *Link) Cred() string { return "" }

// Do runs an operation on snagd over HTTP, as the session and for the
// tool call the context's caller names (ops.CallerOf): once more after
// finding snagd again when it was not reached.
func (l *Link) Do(ctx context.Context, op string, req any) (any, error) {
	c := ops.CallerOf(ctx)
	k := l.cl.As(c.Session, c.Tool).WithHandle(c.Handle)
	ans, err := k.Do(ctx, op, req)
	var e *ops.Error
	if err != nil && !errors.As(err, &e) && ctx.Err() == nil {
		// snagd went away: find it again, and ask once more.
		if rerr := l.cl.Recheck(ctx); rerr == nil {
			ans, err = k.Do(ctx, op, req)
		}
	}
	return ans, err
}

// hold keeps the session's stream open until ctx ends: when it closes (a
// snagd restart), it finds the daemon again and reopens it within snagd's
// grace; when the session has ended, the next tool call registers again.
func (l *Link) hold(ctx context.Context) {
	defer close(l.done)
	var once sync.Once
	for ctx.Err() == nil {
		l.mu.Lock()
		id := l.session.ID
		l.mu.Unlock()
		if id == 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		err := l.cl.Stream(ctx, id, func() { once.Do(func() { close(l.opened) }) })
		if ctx.Err() != nil {
			return
		}
		l.log.Info("session stream closed", "session", id, "err", err)
		if client.SessionEnded(err) {
			l.mu.Lock()
			l.session = client.Session{}
			l.mu.Unlock()
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if err := l.cl.Recheck(ctx); err != nil {
			l.log.Info("snagd not found again yet", "err", err)
		}
	}
}

// Close stops holding the session stream; snagd then releases the
// session's leases after its grace. Watch calls return.
func (l *Link) Close() error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	l.endLife()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// Watch follows snagd's event stream and calls on with the key of each
// task an event names, or "" for a rescan, missed events, or a stream that
// opened again (changes may have been missed meanwhile). It returns when
// ctx ends or the backend is closed.
func (l *Link) Watch(ctx context.Context, on func(key string)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.life, cancel)
	defer stop()
	first := true
	for ctx.Err() == nil {
		if !first {
			on("")
		}
		first = false
		err := l.cl.Events(ctx, func(e client.Event) {
			var data ops.EventTask
			json.Unmarshal(e.Data, &data)
			switch {
			case e.Type == "session":
			case data.Key != "":
				on(data.Key)
			case data.Task != "":
				on(data.Task)
			default:
				on("")
			}
		})
		if ctx.Err() != nil {
			return
		}
		l.log.Info("event stream closed", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		l.cl.Recheck(ctx)
	}
}

var _ mcp.Link = (*Link)(nil)
