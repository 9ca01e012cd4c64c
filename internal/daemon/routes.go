package daemon

import (
	"context"
	"net/http"
	"os"
	"time"

	"github.com/snagdev/snag/api"
)

func (d *Daemon) routes(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	d.guard.pair = newPairing(d.home(), d.root, d.port, d.log)
	mux.HandleFunc("GET /health", d.health)
	// Browsers ask for /favicon.ico on every page of the board, without
	// the token: nothing, rather than a 401 in the console.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=86400")
		w.WriteHeader(http.StatusNoContent)
	})
	d.svc = newService(d)
	d.serveOps(mux, d.svc)
	mux.HandleFunc("POST /pairing-codes", personRoute(d, "a person pairs the browser extension: snag pair", d.pairingCode))
	mux.HandleFunc("POST /pair", d.pair)
	mux.HandleFunc("GET /capture-credentials", personRoute(d, "a person lists the paired extensions: snag pair --list", d.listCredentials))
	mux.HandleFunc("DELETE /capture-credentials", personRoute(d, "a person revokes the extension's credentials: snag pair --revoke", d.revokeCredentials))
	mux.HandleFunc("GET /sessions/{id}/stream", d.ready503(func(w http.ResponseWriter, r *http.Request) { d.stream(ctx, w, r) }))
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) { d.serveEvents(ctx, w, r) })
	d.mcp = d.mcpHandler(ctx)
	mux.Handle(MCPPath, d.mcp) // MCP over Streamable HTTP: POST, GET (its SSE stream), DELETE
	noOAuth := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "snagd has no OAuth: send Authorization: Bearer with the token in " + d.guard.tokenFile})
	}
	mux.HandleFunc("/.well-known/", noOAuth)
	mux.HandleFunc(MCPPath+"/.well-known/", noOAuth)
	if d.servesBoard() {
		mux.HandleFunc("/", d.mountBoard(mux))
	} else {
		// A browser names no worktree: the board is the main worktree's
		// view's, and the other views keep no board (about a megabyte each).
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such endpoint: " + r.Method + " " + r.URL.Path +
				" (the board is the main worktree's: snag open)"})
		})
	}
	public := func(r *http.Request) bool {
		return r.URL.Path == "/health" || r.URL.Path == "/favicon.ico" || wellKnown(r)
	}
	used := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !public(r) {
			d.lastUse.Store(time.Now().UnixNano())
		}
		mux.ServeHTTP(w, r)
	})
	return d.guard.wrap(public, used)
}

// servesBoard reports whether this view mounts the board: the main
// worktree's view and the primary (the first opened), which between them
// are every view a request naming no worktree reaches.
func (d *Daemon) servesBoard() bool {
	return d.host == nil || d == d.host.primary || d.root == d.host.mainRoot()
}

// ready503 answers 503 with Retry-After until the first full rescan is done,
// so nothing is served from an index that may not match the files.
func (d *Daemon) ready503(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !d.e.Ready() {
			writeError(w, &apiError{Status: http.StatusServiceUnavailable, Code: "starting", Message: "snagd is reading the task files: try again in a moment"})
			return
		}
		h(w, r)
	}
}

func (d *Daemon) health(w http.ResponseWriter, r *http.Request) {
	h := Health{Service: "snagd", Root: d.root, GitCommonDir: d.gitCommon, PID: os.Getpid(), Port: d.port,
		Version: d.opts.Version}
	if d.host != nil {
		h.Repository, h.Worktrees = d.host.state, d.host.roots()
		if asked, ok := r.Context().Value(askedKey{}).(string); ok {
			h.Worktree = asked
		}
	}
	if err := d.failure(); err != nil {
		h.Error = err.Error()
	}
	if d.opened.Load() && d.e.Ready() {
		h.Ready, h.Polling = true, d.e.Polling()
		c, _ := d.e.Counts(r.Context())
		h.Counts = c
		if r.URL.Query().Get("progress") != "" {
			p := d.e.Progress()
			h.Progress = &api.Progress{Sweeps: p.Sweeps, Batches: p.Batches, SettlesDue: p.SettlesDue, Settles: p.Settles, Reconciles: p.Reconciles}
			if d.host != nil {
				h.Progress.IdleChecks = d.host.idleChecks.Load()
			}
		}
	}
	if n := r.URL.Query().Get("nonce"); n != "" && len(n) <= 256 {
		h.Proof = d.tok.Proof(n)
	}
	writeJSON(w, http.StatusOK, h)
}

// maxList is the most tasks one GET /tasks answers; the next page follows
// from its cursor.
const maxList = 10000

// ToolHeader names the MCP tool a request serves, for the audit log: the
// bridge sends it, with the session, on every request a tool call makes.
const ToolHeader = api.ToolHeader
