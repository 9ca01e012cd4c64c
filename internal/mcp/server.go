package mcp

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

//go:embed instructions.md
var instructions string

// Options configure a server.
type Options struct {
	Root    string // the project root, the folder holding .snag/
	Daemon  Live   // nil when no snagd answers: reads come from the files
	Version string // snag's version, reported in initialize
	Log     *slog.Logger
	// Redial, when set, is tried before a write when there is no daemon.
	Redial func(ctx context.Context) (Live, error)
	// DialErr is why no daemon was found at the start, when Daemon is nil;
	// one wrapping [ErrWrongToken] is named in answers instead of the
	// advice to start snagd.
	DialErr error
	// Toolsets are the toolsets to serve (see [Toolsets]); nil serves
	// queue alone.
	Toolsets []string
	// Where, for a bridge, reads the branch and commit its worktree has
	// checked out, for every graph write ([GitWhere]); nil over HTTP,
	// where the agent names its branch.
	Where Where
	// Workspace is the project's workspace name: a tool call whose
	// arguments name another workspace is refused, naming both. "" checks
	// nothing. It is asked at each call that names one.
	Workspace func() string
	// HandleIdle is how long snagd keeps an agent known only by its
	// handle (DefaultHandleIdle when 0), as snag_claim's description says.
	HandleIdle time.Duration
	// Cursors, when set, is the table of snag_list's short cursors, shared
	// by servers made per request (the sessionless protocol): a cursor
	// works on any of them. Nil gives the server its own.
	Cursors *Cursors
	// In and Out are the protocol's stdin and stdout (os.Stdin and
	// os.Stdout when nil).
	In  io.Reader
	Out io.Writer
}

// server holds the state the tools share.
type server struct {
	mu    sync.Mutex // guards opts.Daemon, set by Redial, and opts.DialErr
	opts  Options
	files *Files
	log   *slog.Logger
	// cursors maps the short cursors snag_list shows to the backend's.
	cursors *Cursors
	// srv is the SDK's server, for notifications; subs what its clients
	// subscribed to. The events are followed with life until the live
	// backend is closed.
	srv  *sdk.Server
	subs subs
	life context.Context
}

// Cursors hands out short opaque cursors ("c1", "c2", ...) for the
// backend's long ones (about 110 bytes of base64 a model would copy back):
// one table per stdio bridge or MCP session over HTTP, and one that every
// sessionless request's server shares (Options.Cursors). It keeps the
// latest maxCursors. It is safe for concurrent use.
type Cursors struct {
	mu    sync.Mutex
	next  int
	byKey map[string]string
	keys  []string
}

const maxCursors = 1024

// short records a backend cursor and returns its short form.
func (t *Cursors) short(long string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byKey == nil {
		t.byKey = map[string]string{}
	}
	t.next++
	k := "c" + strconv.Itoa(t.next)
	t.byKey[k] = long
	t.keys = append(t.keys, k)
	if len(t.keys) > maxCursors {
		delete(t.byKey, t.keys[0])
		t.keys = t.keys[1:]
	}
	return k
}

// long is the backend cursor of a short one; a long cursor passes through.
func (t *Cursors) long(short string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.byKey[short]; ok {
		return c, nil
	}
	if len(short) > 16 { // a backend cursor, from before short ones
		return short, nil
	}
	return "", fmt.Errorf("cursor %q is not one this server gave, or it is too old: call snag_list without a cursor to start again", short)
}

// NewServer returns the MCP server with the toolsets opts names (the
// queue toolset when it names none) and the resources.
func NewServer(opts Options) *sdk.Server {
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &server{opts: opts, files: &Files{Root: opts.Root}, log: opts.Log, cursors: opts.Cursors}
	if s.cursors == nil {
		s.cursors = &Cursors{}
	}
	s.life = context.Background()
	srv := sdk.NewServer(&sdk.Implementation{Name: "snag", Version: opts.Version}, &sdk.ServerOptions{
		Instructions:       instructions,
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
		CompletionHandler:  s.complete,
		SetCacheable:       cacheable,
		// Declared as they are: snag's tools, prompts and resources never
		// change while it runs, so no list_changed is promised (the SDK
		// adds subscribe and completions, which snag has).
		Capabilities: &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}, Tools: &sdk.ToolCapabilities{},
			Prompts: &sdk.PromptCapabilities{}, Resources: &sdk.ResourceCapabilities{}},
		InitializedHandler: func(ctx context.Context, req *sdk.InitializedRequest) {
			if d := s.daemon(); d != nil {
				if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
					d.SetClient(p.ClientInfo.Name, p.ClientInfo.Version)
				}
				go d.Start(context.Background())
			}
		},
	})
	s.srv = srv
	if len(opts.Toolsets) == 0 || slices.Contains(opts.Toolsets, "queue") {
		s.addTools(srv)
	}
	if slices.Contains(opts.Toolsets, "team") {
		s.addTeamTools(srv)
	}
	if slices.Contains(opts.Toolsets, "graph") {
		s.addGraphTools(srv)
	}
	s.addPrompts(srv)
	// agentNotice first: the call's Call is in the context the others see.
	srv.AddReceivingMiddleware(s.agentNotice, s.workspaceCheck, s.coordNotice)
	s.addResources(srv)
	return srv
}

// listTTL is how long a client may keep a list snag answers (the tools,
// the resources and their templates, server/discover): they change only
// with snag's version.
const listTTL = 5 * 60 * 1000

// cacheable says how a result may be cached (MCP 2026-07-28's ttlMs and
// cacheScope): the lists, the same for every caller of one /mcp address,
// public for listTTL; a resource, task data behind the token, private and
// stale at once.
func cacheable(_ context.Context, req sdk.Request, c *sdk.Cacheable) {
	if _, ok := req.(*sdk.ReadResourceRequest); ok {
		c.TTLMs, c.CacheScope = 0, "private"
		return
	}
	c.TTLMs, c.CacheScope = listTTL, "public"
}

// workspaceCheck takes a workspace argument off every tool call (no
// tool declares it: it guards against a client pointed at the wrong
// project) and refuses the call when it names another workspace than
// this project's.
func (s *server) workspaceCheck(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		call, ok := req.(*sdk.CallToolRequest)
		if !ok || method != "tools/call" || call.Params == nil || !bytes.Contains(call.Params.Arguments, []byte(`"workspace"`)) {
			return next(ctx, method, req)
		}
		var args map[string]json.RawMessage
		if json.Unmarshal(call.Params.Arguments, &args) != nil {
			return next(ctx, method, req)
		}
		raw, ok := args["workspace"]
		if !ok {
			return next(ctx, method, req)
		}
		var ws string
		if err := json.Unmarshal(raw, &ws); err != nil {
			return toolError(fmt.Errorf("workspace: want a string, the project's workspace name")), nil
		}
		if own := s.workspace(); own != "" && ws != "" && ws != own {
			return toolError(fmt.Errorf("this snag serves workspace %q, not %q: the client is pointed at another project; "+
				"fix its /mcp address (or its workspace), nothing was done", own, ws)), nil
		}
		delete(args, "workspace")
		call.Params.Arguments, _ = json.Marshal(args)
		return next(ctx, method, req)
	}
}

// coordNotice adds to every tool result what the backend says of its
// coordination store while snagd cannot reach it (Noticer): an agent
// learns that its leases are at risk from whatever call it makes next.
func (s *server) coordNotice(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" || err != nil {
			return res, err
		}
		n, ok := s.daemon().(Noticer)
		if !ok {
			return res, err
		}
		if r, ok := res.(*sdk.CallToolResult); ok {
			if notice := n.Notice(ctx); notice != "" {
				r.Content = append(r.Content, &sdk.TextContent{Text: "note: " + notice})
			}
		}
		return res, err
	}
}

// workspace is the project's workspace name, "" when unknown.
func (s *server) workspace() string {
	if s.opts.Workspace == nil {
		return ""
	}
	return s.opts.Workspace()
}

// Run serves MCP over stdin and stdout until the client closes stdin.
func Run(ctx context.Context, opts Options) error {
	in, out := opts.In, opts.Out
	if in == nil {
		in = os.Stdin
	}
	if out == nil {
		out = os.Stdout
	}
	err := NewServer(opts).Run(ctx, lineTransport(in, out))
	if opts.Daemon != nil {
		opts.Daemon.Close()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// unreachable reports whether err is a failure to reach snagd.
func unreachable(err error) bool { return errors.Is(err, ErrUnreachable) }

// note is what a files answer says about itself.
const filesNote = "no snagd; statuses may be stale"

// wrongTokenNote is a files answer's note when snagd runs but proved
// another token.
const wrongTokenNote = "snagd runs but holds another token than this server reads (a write's error says the fix); statuses may be stale"

// ErrWrongToken is wrapped by a dial error when a snagd serves the project
// but proves a token other than the one this server read: starting snagd
// is not the fix, sharing its token file is.
var ErrWrongToken = errors.New("snagd holds another token")

// WrongToken marks err, a dial error, as caused by a snagd that proves
// another token; its text stays err's.
func WrongToken(err error) error { return wrongToken{err} }

type wrongToken struct{ error }

func (w wrongToken) Unwrap() []error { return []error{w.error, ErrWrongToken} }

// dialErr is why there is no daemon, or nil.
func (s *server) dialErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.DialErr
}

// noDaemonNote is the note of an answer read from the files.
func (s *server) noDaemonNote() string {
	if errors.Is(s.dialErr(), ErrWrongToken) {
		return wrongTokenNote
	}
	return filesNote
}

// reader picks the backend for a read: the daemon, or the files when it
// cannot be reached.
func (s *server) read(ctx context.Context, f func(b Backend) error) (source, note string, err error) {
	if d := s.daemon(); d != nil {
		err = f(d)
		if !unreachable(err) {
			return SourceDaemon, "", s.explain(err)
		}
		s.log.Info("snagd unreachable; reading the files", "err", err)
	}
	return SourceFiles, s.noDaemonNote(), s.explain(f(s.files))
}

// writer is the backend for a write.
func (s *server) writer(ctx context.Context) Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Daemon == nil && s.opts.Redial != nil {
		d, err := s.opts.Redial(ctx)
		if err == nil {
			s.opts.Daemon = d
		}
		s.opts.DialErr = err
	}
	if s.opts.Daemon != nil {
		return s.opts.Daemon
	}
	return s.files
}

// daemon is the live backend, or nil.
func (s *server) daemon() Live {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.Daemon
}

// explain turns an error into the words a model reads, naming the fix.
func (s *server) explain(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoDaemon) && errors.Is(s.dialErr(), ErrWrongToken):
		return fmt.Errorf("snag writes only through snagd, and %v. Tell the person: starting snagd cannot help, one runs. "+
			"The queue is still readable: snag_list, snag_get, snag_search, or Read/Grep .snag/tasks/*.md", strings.TrimPrefix(s.dialErr().Error(), "no snagd serves this project: "))
	case errors.Is(err, ErrNoDaemon):
		return fmt.Errorf("%v: start it with `snag daemon --root %s` (or ask the person to), then call again. "+
			"The queue is still readable: snag_list, snag_get, snag_search, or Read/Grep .snag/tasks/*.md", err, s.opts.Root)
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%v: snag_list or snag_search finds a task's key", err)
	case codeOf(err) == "blocked":
		// snagd's words are the CLI's; an agent is told the calls.
		key, _, _ := strings.Cut(err.Error(), " ")
		what, _, _ := strings.Cut(err.Error(), ":")
		return fmt.Errorf("%s: snag_claim {\"id\": %q, \"force\": true} takes it anyway, or snag_claim with no id takes the next ready task", what, key)
	case codeOf(err) == "transition":
		return fmt.Errorf("%v: snag_list shows what is open, and snag_claim with no id takes the next ready task", err)
	case unreachable(err):
		return fmt.Errorf("snagd cannot be reached (%v): start it with `snag daemon --root %s`; the files stay readable with Read/Grep .snag/tasks/*.md", err, s.opts.Root)
	}
	return err
}

// codeOf is the code of an error snagd answered (not_found, transition,
// blocked, ...), or "".
func codeOf(err error) string {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ""
}

// absShot is the absolute path of a screenshot named relative to .snag/,
// or "" when the name leaves .snag/.
func (s *server) absShot(rel string) string {
	clean := path.Clean(rel)
	if !filepath.IsLocal(clean) {
		return ""
	}
	return filepath.Join(s.opts.Root, ".snag", filepath.FromSlash(clean))
}

func readLocal(root, rel string, max int64) ([]byte, error) {
	r, err := os.OpenRoot(filepath.Join(root, ".snag"))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(filepath.FromSlash(path.Clean(rel)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", rel, max)
	}
	return b, nil
}

func text(s string) []sdk.Content { return []sdk.Content{&sdk.TextContent{Text: s}} }

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
