// Package fileclaims is the file claims service: an agent claims the
// repository paths or globs it is about to edit, all or nothing, for a
// while; another agent's claim in the way refuses it, naming the holders;
// a check lists the claims over paths, a commit guard the claims a
// commit would break, and a person frees a claim from whoever holds it.
//
// It owns the claims' policy: their bounds, the canonical form of the
// paths they name (relative to the repository's top folder, across its
// worktrees, folded where the filesystem folds case), and the words of
// each refusal. A claim lives in the live state (the embedded store, or
// PostgreSQL in team mode), where it is made first across every member,
// and in snag.db, which mirrors this worktree's: the live state's side is
// the engine's (Engine), snag.db's is read and written here (Index).
//
// It must not import a transport (net/http, the daemon, mcp, the client,
// the board, the CLI) nor another service.
package fileclaims

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/repopath"
	"github.com/snagdev/snag/internal/snag"
)

// File claims' bounds.
const (
	// DefaultTTL is how long a file claim lasts unless renewed.
	DefaultTTL = 900 * time.Second
	// MaxTTL is the longest a claim may ask for: a day.
	MaxTTL = 24 * time.Hour
	// maxPaths is the most paths one claim names.
	maxPaths = 100
	// maxPath is the longest path or glob a claim names: comparing globs
	// costs with the product of their lengths.
	maxPath = 512
)

// Engine is what the service needs of the engine (*engine.Engine
// satisfies it).
type Engine interface {
	// Root is the project root of the worktree snagd serves.
	Root() string
	// Events is the hub the service publishes its events on.
	Events() *engine.Hub
	// Audit records an entry in the audit log.
	Audit(ctx context.Context, a snag.AuditEntry)

	// FileClaims lists every live claim, the live state's other members'
	// too.
	FileClaims(ctx context.Context) ([]snag.FileClaim, error)
	// ClaimSharedFiles claims paths in the live state, all or nothing,
	// and answers the claims in the way.
	ClaimSharedFiles(ctx context.Context, s index.Session, r index.FileClaimRequest) ([]snag.FileClaim, error)
	// UnshareFiles queues for the live state the end of a session's
	// claims of paths.
	UnshareFiles(session int64, paths []string, why string)
	// ForceReleaseSharedFile frees a path in the live state from whoever
	// claims it, and answers the other clones' claims it ended.
	ForceReleaseSharedFile(ctx context.Context, path, why string) ([]snag.FileClaim, error)
}

// Index is what the service reads and writes of snag.db (*index.DB
// satisfies it): this worktree's side of the claims, and the task a
// claim is for.
type Index interface {
	Get(ctx context.Context, ref queue.Ref) (*index.Item, error)
	ClaimFiles(ctx context.Context, r index.FileClaimRequest, now time.Time) (index.FileClaimResult, error)
	ReleaseFiles(ctx context.Context, sessionID int64, paths []string, why string) ([]snag.FileClaim, error)
	ForceReleaseFile(ctx context.Context, path, why string) ([]snag.FileClaim, error)
}

// Service claims, checks and releases files. It is safe for concurrent
// use, and has no background work: a claim ends when it expires, which
// every read of the claims applies.
type Service struct {
	e     Engine
	db    Index
	repos repoRoots // each worktree's repository
}

// New returns the service over e and its snag.db, db.
func New(e Engine, db Index) *Service {
	return &Service{e: e, db: db}
}

// Request is a claim of repository paths or globs, all or nothing.
type Request struct {
	Paths []string
	Task  string // a task ref the claim is for, or ""
	TTL   time.Duration
	// Shared claims overlap other shared claims; the default is exclusive.
	Shared bool
}

// Claimed is what a claim of files did: the claims made or renewed
// (granted), or the claims in the way (conflicts) or the session's own
// that expired before their renewal came (late), when nothing was claimed.
type Claimed struct {
	Granted   bool
	Claims    []snag.FileClaim
	Renewed   int
	Conflicts []snag.FileClaim
	Late      []snag.FileClaim
}

func refuse(kind error, code, format string, args ...any) *engine.Error {
	return &engine.Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Claim claims repository paths or globs for session s, all or nothing
// (index.DB.ClaimFiles): exclusive by default, for TTL (default
// DefaultTTL). The claim is made in the live state first, across every
// member (the repository's other worktrees, a team's other clones);
// snag.db mirrors it. A refusal names every holder in the way with its
// paths and the seconds its claim has left.
func (f *Service) Claim(ctx context.Context, s index.Session, r Request) (Claimed, error) {
	entry := snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "files_claim"}
	refused := func(err error) (Claimed, error) {
		entry.Outcome, entry.Detail = "refused", err.Error()
		f.e.Audit(ctx, entry)
		return Claimed{}, err
	}
	req, err := f.request(ctx, s, r)
	if err != nil {
		return refused(err)
	}
	entry.TaskID = req.TaskID
	now := time.Now()
	conflicts, err := f.e.ClaimSharedFiles(ctx, s, req)
	if err != nil {
		return refused(err)
	}
	if len(conflicts) > 0 {
		_, err := refused(refuse(engine.ErrFilesHeld, "files_held", "claim: nothing was claimed: %s", HoldersOf(conflicts, now)))
		return Claimed{Conflicts: conflicts}, err
	}
	res, err := f.db.ClaimFiles(ctx, req, now)
	if err != nil {
		return Claimed{}, err
	}
	if len(res.Late) > 0 || len(res.Conflicts) > 0 {
		f.e.UnshareFiles(s.ID, req.Paths, "the claim was refused here")
	}
	switch {
	case len(res.Late) > 0:
		var late []string
		for _, c := range res.Late {
			late = append(late, fmt.Sprintf("%s (expired %ds ago)", c.Path, int(now.Sub(c.Expires).Seconds())))
		}
		_, err := refused(refuse(engine.ErrInvalid, "expired", "claim: your claim of %s expired before this renewal came, and has ended: "+
			"another agent may have changed the files meanwhile. Check them, then claim again (a new claim, not a renewal)",
			strings.Join(late, ", ")))
		return Claimed{Late: res.Late}, err
	case len(res.Conflicts) > 0:
		_, err := refused(refuse(engine.ErrFilesHeld, "files_held", "claim: nothing was claimed: %s", HoldersOf(res.Conflicts, now)))
		return Claimed{Conflicts: res.Conflicts}, err
	}
	entry.Outcome = "ok"
	entry.Detail = fmt.Sprintf("%s %s for %ds", mode(req.Exclusive), strings.Join(req.Paths, ", "), int(req.TTL.Seconds()))
	if res.Renewed > 0 {
		entry.Detail += fmt.Sprintf(" (%d renewed)", res.Renewed)
	}
	f.e.Audit(ctx, entry)
	f.e.Events().Publish(snag.FilesEvent{Holder: s.Name, Claimed: req.Paths})
	return Claimed{Granted: true, Claims: res.Claimed, Renewed: res.Renewed}, nil
}

// request checks r against the claims' bounds and words it as snag.db's
// claim for session s: its paths canonical, its task's id, its TTL.
func (f *Service) request(ctx context.Context, s index.Session, r Request) (index.FileClaimRequest, error) {
	switch {
	case len(r.Paths) == 0:
		return index.FileClaimRequest{}, refuse(engine.ErrInvalid, "no_paths", "claim: name the paths or globs to claim, like [\"web/app.ts\", \"web/**/*.css\"]")
	case len(r.Paths) > maxPaths:
		return index.FileClaimRequest{}, refuse(engine.ErrInvalid, "too_many_paths", "claim: %d paths is over %d: claim a folder or a glob instead", len(r.Paths), maxPaths)
	case r.TTL < 0 || r.TTL > MaxTTL:
		return index.FileClaimRequest{}, refuse(engine.ErrInvalid, "bad_ttl", "claim: ttl_sec must be between 1 and %d (a day); omit it for %d", int(MaxTTL.Seconds()), int(DefaultTTL.Seconds()))
	}
	req := index.FileClaimRequest{SessionID: s.ID, Holder: s.Name, TTL: r.TTL, Exclusive: !r.Shared}
	if req.TTL == 0 {
		req.TTL = DefaultTTL
	}
	var err error
	if req.Paths, err = f.canonical(&s, r.Paths); err != nil {
		return index.FileClaimRequest{}, err
	}
	if r.Task != "" {
		ref, err := queue.ParseRef(r.Task)
		if err != nil {
			return index.FileClaimRequest{}, refuse(engine.ErrInvalid, "bad_ref", "claim: task: %v", err)
		}
		it, err := f.db.Get(ctx, ref)
		if err != nil {
			return index.FileClaimRequest{}, refuse(engine.ErrNotFound, "not_found", "claim: no task %s: snag_list shows the keys", r.Task)
		}
		req.TaskID = it.ID
	}
	return req, nil
}

func mode(exclusive bool) string {
	if exclusive {
		return "exclusive"
	}
	return "shared"
}

// Release ends session s's claims of paths, or every claim it holds when
// paths is empty, and returns the claims it ended.
func (f *Service) Release(ctx context.Context, s index.Session, paths []string) ([]snag.FileClaim, error) {
	canon, err := f.canonical(&s, paths)
	if err != nil {
		return nil, err
	}
	out, err := f.db.ReleaseFiles(ctx, s.ID, canon, "released")
	if err != nil {
		return nil, err
	}
	f.e.UnshareFiles(s.ID, canon, "released")
	var names []string
	for _, c := range out {
		names = append(names, c.Path)
	}
	detail := strings.Join(names, ", ")
	if len(out) == 0 {
		detail = "nothing held"
	}
	f.e.Audit(ctx, snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "files_release", Outcome: "ok", Detail: detail})
	if len(out) > 0 {
		f.e.Events().Publish(snag.FilesEvent{Holder: s.Name, Released: names})
	}
	return out, nil
}

// PersonRelease frees path (a claim's path or glob, as listed) from
// whoever claims it, for a person, by, with a reason: the audit log says
// who and why.
func (f *Service) PersonRelease(ctx context.Context, path, by, reason string) ([]snag.FileClaim, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, refuse(engine.ErrInvalid, "no_reason", "release a file claim: say why (--reason): the holder reads it in the audit log")
	}
	canon, err := f.canonical(nil, []string{path})
	if err != nil {
		return nil, err
	}
	why := "released by " + by + ": " + reason
	out, err := f.db.ForceReleaseFile(ctx, canon[0], why)
	if err != nil {
		return nil, err
	}
	others, err := f.e.ForceReleaseSharedFile(ctx, canon[0], why)
	if err != nil {
		return nil, err
	}
	out = append(out, others...)
	if len(out) == 0 {
		return nil, refuse(engine.ErrNotFound, "not_claimed", "no live claim of %s: snag files lists the claims as they are named", canon[0])
	}
	for _, c := range out {
		f.e.Audit(ctx, snag.AuditEntry{SessionID: c.SessionID, Actor: queue.Person, Agent: by, Action: "files_release",
			Outcome: "ok", Detail: c.Holder + ": " + c.Path + ": " + why})
	}
	f.e.Events().Publish(snag.FilesEvent{Released: canon, By: by})
	return out, nil
}

// List lists every live file claim: the live state's other members' too
// (engine.Engine.FileClaims).
func (f *Service) List(ctx context.Context) ([]snag.FileClaim, error) { return f.e.FileClaims(ctx) }

// canonical cleans the paths a session names, relative to its worktree's
// repository (s may be nil: the worktree snagd serves): refused as a
// whole when one is not a path snag can claim.
func (f *Service) canonical(s *index.Session, paths []string) ([]string, error) {
	root := f.e.Root()
	if s != nil && s.Root != "" {
		root = s.Root
	}
	rr := f.repos.repoOf(root)
	var out []string
	for _, p := range paths {
		if len(p) > maxPath {
			return nil, refuse(engine.ErrInvalid, "bad_path", "path %q… is over %d bytes: claim its folder instead", p[:40], maxPath)
		}
		c, err := repopath.Clean(p, repopath.Options{Root: rr.top, Fold: rr.fold})
		if err != nil {
			return nil, refuse(engine.ErrInvalid, "bad_path", "%v", err)
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}
