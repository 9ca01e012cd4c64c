package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/repopath"
	"github.com/snagdev/snag/internal/snag"
)

// File claims' bounds.
const (
	// DefaultClaimTTL is how long a file claim lasts unless renewed.
	DefaultClaimTTL = 900 * time.Second
	// MaxClaimTTL is the longest a claim may ask for: a day.
	MaxClaimTTL = 24 * time.Hour
	// maxClaimPaths is the most paths one claim names.
	maxClaimPaths = 100
	// maxClaimPath is the longest path or glob a claim names: comparing
	// globs costs with the product of their lengths.
	maxClaimPath = 512
)

// ErrFilesHeld: a file claim overlaps another agent's live claim.
var ErrFilesHeld = errors.New("files held")

// FilesRequest is a claim of repository paths or globs, all or nothing.
type FilesRequest struct {
	Paths []string
	Task  string // a task ref the claim is for, or ""
	TTL   time.Duration
	// Shared claims overlap other shared claims; the default is exclusive.
	Shared bool
}

// FilesClaimed is what a claim of files did: the claims made or renewed
// (granted), or the claims in the way (conflicts) or the session's own
// that expired before their renewal came (late), when nothing was claimed.
type FilesClaimed struct {
	Granted   bool
	Claims    []snag.FileClaim
	Renewed   int
	Conflicts []snag.FileClaim
	Late      []snag.FileClaim
}

// repoRoots caches each worktree's repository top folder and whether its
// filesystem folds case: file claims name paths relative to it.
type repoRoots struct {
	mu sync.Mutex
	m  map[string]repoRoot
}

type repoRoot struct {
	top  string
	fold bool
}

// repoOf is the repository top folder of the worktree at root (the
// project root itself outside git), with symlinks resolved.
func (r *repoRoots) repoOf(root string) repoRoot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rr, ok := r.m[root]; ok {
		return rr
	}
	top := gitdir.Top(root)
	if top == "" {
		top = root
	}
	if real, err := filepath.EvalSymlinks(top); err == nil {
		top = real
	}
	rr := repoRoot{top: top, fold: repopath.CaseInsensitive(top)}
	if r.m == nil {
		r.m = map[string]repoRoot{}
	}
	r.m[root] = rr
	return rr
}

// canonical cleans the paths a session names, relative to its worktree's
// repository: refused as a whole when one is not a path snag can claim.
func (e *Engine) canonical(s *index.Session, paths []string) ([]string, error) {
	root := e.root
	if s != nil && s.Root != "" {
		root = s.Root
	}
	rr := e.repos.repoOf(root)
	var out []string
	for _, p := range paths {
		if len(p) > maxClaimPath {
			return nil, refuse(ErrInvalid, "bad_path", "path %q… is over %d bytes: claim its folder instead", p[:40], maxClaimPath)
		}
		c, err := repopath.Clean(p, repopath.Options{Root: rr.top, Fold: rr.fold})
		if err != nil {
			return nil, refuse(ErrInvalid, "bad_path", "%v", err)
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// ClaimFiles claims repository paths or globs for session s, all or
// nothing (index.DB.ClaimFiles): exclusive by default, for TTL (default
// DefaultClaimTTL). A refusal names every holder in the way with its paths
// and the seconds its claim has left.
func (e *Engine) ClaimFiles(ctx context.Context, s index.Session, r FilesRequest) (FilesClaimed, error) {
	entry := snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "files_claim"}
	refused := func(err error) (FilesClaimed, error) {
		entry.Outcome, entry.Detail = "refused", err.Error()
		e.Audit(ctx, entry)
		return FilesClaimed{}, err
	}
	switch {
	case len(r.Paths) == 0:
		return refused(refuse(ErrInvalid, "no_paths", "claim: name the paths or globs to claim, like [\"web/app.ts\", \"web/**/*.css\"]"))
	case len(r.Paths) > maxClaimPaths:
		return refused(refuse(ErrInvalid, "too_many_paths", "claim: %d paths is over %d: claim a folder or a glob instead", len(r.Paths), maxClaimPaths))
	case r.TTL < 0 || r.TTL > MaxClaimTTL:
		return refused(refuse(ErrInvalid, "bad_ttl", "claim: ttl_sec must be between 1 and %d (a day); omit it for %d", int(MaxClaimTTL.Seconds()), int(DefaultClaimTTL.Seconds())))
	}
	if r.TTL == 0 {
		r.TTL = DefaultClaimTTL
	}
	paths, err := e.canonical(&s, r.Paths)
	if err != nil {
		return refused(err)
	}
	taskID := ""
	if r.Task != "" {
		ref, err := queue.ParseRef(r.Task)
		if err != nil {
			return refused(refuse(ErrInvalid, "bad_ref", "claim: task: %v", err))
		}
		it, err := e.p.DB.Get(ctx, ref)
		if err != nil {
			return refused(refuse(ErrNotFound, "not_found", "claim: no task %s: snag_list shows the keys", r.Task))
		}
		taskID = it.ID
		entry.TaskID = it.ID
	}
	now := time.Now()
	// The claim is made in the live state first, across every member
	// (the repository's other worktrees, a team's other clones); snag.db
	// mirrors it.
	if err := e.teamReady(ctx); err != nil {
		return refused(err)
	}
	shared, err := e.team.s.ClaimFiles(ctx, coord.FilesRequest{Session: coordSession(s), Paths: paths, TaskID: taskID,
		TTL: r.TTL, Exclusive: !r.Shared}, repopath.Overlap)
	if err != nil {
		return refused(e.teamErr(err))
	}
	if len(shared.Conflicts) > 0 {
		cs := e.teamClaims(shared.Conflicts)
		_, err := refused(refuse(ErrFilesHeld, "files_held", "claim: nothing was claimed: %s", HoldersOf(cs, now)))
		return FilesClaimed{Conflicts: cs}, err
	}
	res, err := e.p.DB.ClaimFiles(ctx, index.FileClaimRequest{SessionID: s.ID, Holder: s.Name, Paths: paths,
		TaskID: taskID, TTL: r.TTL, Exclusive: !r.Shared}, now)
	if err != nil {
		return FilesClaimed{}, err
	}
	if len(res.Late) > 0 || len(res.Conflicts) > 0 {
		e.team.queue(teamOp{files: &teamFiles{session: s.ID, paths: paths}, why: "the claim was refused here"})
	}
	switch {
	case len(res.Late) > 0:
		var late []string
		for _, c := range res.Late {
			late = append(late, fmt.Sprintf("%s (expired %ds ago)", c.Path, int(now.Sub(c.Expires).Seconds())))
		}
		_, err := refused(refuse(ErrInvalid, "expired", "claim: your claim of %s expired before this renewal came, and has ended: "+
			"another agent may have changed the files meanwhile. Check them, then claim again (a new claim, not a renewal)",
			strings.Join(late, ", ")))
		return FilesClaimed{Late: res.Late}, err
	case len(res.Conflicts) > 0:
		_, err := refused(refuse(ErrFilesHeld, "files_held", "claim: nothing was claimed: %s", HoldersOf(res.Conflicts, now)))
		return FilesClaimed{Conflicts: res.Conflicts}, err
	}
	entry.Outcome = "ok"
	entry.Detail = fmt.Sprintf("%s %s for %ds", mode(!r.Shared), strings.Join(paths, ", "), int(r.TTL.Seconds()))
	if res.Renewed > 0 {
		entry.Detail += fmt.Sprintf(" (%d renewed)", res.Renewed)
	}
	e.Audit(ctx, entry)
	e.hub.Publish(snag.FilesEvent{Holder: s.Name, Claimed: paths})
	return FilesClaimed{Granted: true, Claims: res.Claimed, Renewed: res.Renewed}, nil
}

func mode(exclusive bool) string {
	if exclusive {
		return "exclusive"
	}
	return "shared"
}

// HoldersOf says who holds the claims cs, grouped by holder, each with
// its paths and the seconds left at now: "LYNX holds web/app.ts, web/**
// (exclusive, 840 s left)".
func HoldersOf(cs []snag.FileClaim, now time.Time) string {
	type group struct {
		paths []string
		left  int
		excl  bool
	}
	var order []string
	by := map[string]*group{}
	for _, c := range cs {
		g, ok := by[c.Holder]
		if !ok {
			g = &group{left: 1 << 30}
			by[c.Holder] = g
			order = append(order, c.Holder)
		}
		g.paths = append(g.paths, c.Path)
		g.left = min(g.left, max(0, int(c.Expires.Sub(now).Seconds())))
		g.excl = g.excl || c.Exclusive
	}
	var parts []string
	for _, h := range order {
		g := by[h]
		parts = append(parts, fmt.Sprintf("%s holds %s (%s, %d s left)", h, strings.Join(g.paths, ", "), mode(g.excl), g.left))
	}
	return strings.Join(parts, "; ")
}

// ReleaseFiles ends session s's claims of paths, or every claim it holds
// when paths is empty, and returns the claims it ended.
func (e *Engine) ReleaseFiles(ctx context.Context, s index.Session, paths []string) ([]snag.FileClaim, error) {
	canon, err := e.canonical(&s, paths)
	if err != nil {
		return nil, err
	}
	out, err := e.p.DB.ReleaseFiles(ctx, s.ID, canon, "released")
	if err != nil {
		return nil, err
	}
	e.team.queue(teamOp{files: &teamFiles{session: s.ID, paths: canon}, why: "released"})
	var names []string
	for _, c := range out {
		names = append(names, c.Path)
	}
	detail := strings.Join(names, ", ")
	if len(out) == 0 {
		detail = "nothing held"
	}
	e.Audit(ctx, snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "files_release", Outcome: "ok", Detail: detail})
	if len(out) > 0 {
		e.hub.Publish(snag.FilesEvent{Holder: s.Name, Released: names})
	}
	return out, nil
}

// FilesCheck is what a check found of one path: the live claims that
// cover it or overlap it.
type FilesCheck struct {
	Path   string
	Claims []snag.FileClaim
}

// CheckFiles reports, for each of paths (cleaned as a claim of s would
// be; s may be nil, for a person), the live claims that overlap it.
func (e *Engine) CheckFiles(ctx context.Context, s *index.Session, paths []string) ([]FilesCheck, error) {
	canon, err := e.canonical(s, paths)
	if err != nil {
		return nil, err
	}
	live, err := e.FileClaims(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]FilesCheck, len(canon))
	for i, p := range canon {
		out[i].Path = p
		for _, c := range live {
			if repopath.Overlap(c.Path, p) {
				out[i].Claims = append(out[i].Claims, c)
			}
		}
	}
	return out, nil
}

// FileClaims lists every live file claim: the live state's other
// members' too (the repository's other worktrees, and in team mode the
// other clones', each holder named with its machine: "LYNX on build-2").
// With the store out of reach, this view's alone.
func (e *Engine) FileClaims(ctx context.Context) ([]snag.FileClaim, error) {
	local, err := e.p.DB.FileClaims(ctx, time.Now())
	if err != nil || e.team.cutOff() > 0 {
		return local, err
	}
	shared, err := e.team.s.FileClaims(ctx)
	if err != nil {
		return local, nil
	}
	var others []coord.FileClaim
	for _, c := range shared {
		if c.Clone != e.team.s.Clone() {
			others = append(others, c)
		}
	}
	return append(local, e.teamClaims(others)...), nil
}

// teamClaims words the store's file claims as the index's, each holder
// named with its machine when it is another clone's.
func (e *Engine) teamClaims(cs []coord.FileClaim) []snag.FileClaim {
	out := make([]snag.FileClaim, len(cs))
	for i, c := range cs {
		holder := c.Holder
		if e.across() {
			holder = c.HolderOn(e.team.s.Clone())
		}
		out[i] = snag.FileClaim{ID: c.ID, Path: c.Path, SessionID: c.Session, Holder: holder,
			TaskID: c.TaskID, Exclusive: c.Exclusive, Acquired: c.Acquired, Expires: c.Expires}
		if c.Clone != e.team.s.Clone() {
			out[i].SessionID = 0 // another clone's session: its id means nothing here
		}
	}
	return out
}

// FileClaimsOf lists session id's claims, expired ones included.
func (e *Engine) FileClaimsOf(ctx context.Context, id int64) ([]snag.FileClaim, error) {
	return e.p.DB.FileClaimsOf(ctx, id)
}

// Guard checks staged paths (repository-relative, as git names them)
// against the live exclusive claims of every session but the committer's
// (named by committer; "" for none): it returns the claims each path
// would break, for a commit guard to refuse.
func (e *Engine) Guard(ctx context.Context, committer string, paths []string) ([]FilesCheck, error) {
	live, err := e.FileClaims(ctx)
	if err != nil {
		return nil, err
	}
	fold := e.repos.repoOf(e.root).fold
	var out []FilesCheck
	for _, p := range paths {
		if fold {
			p = strings.ToLower(p)
		}
		var in []snag.FileClaim
		for _, c := range live {
			if c.Exclusive && !strings.EqualFold(c.Holder, committer) && repopath.Match(c.Path, p) {
				in = append(in, c)
			}
		}
		if len(in) > 0 {
			out = append(out, FilesCheck{Path: p, Claims: in})
		}
	}
	return out, nil
}

// PersonReleaseFile frees path (a claim's path or glob, as listed) from
// whoever claims it, for a person, by, with a reason: the audit log says
// who and why.
func (e *Engine) PersonReleaseFile(ctx context.Context, path, by, reason string) ([]snag.FileClaim, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, refuse(ErrInvalid, "no_reason", "release a file claim: say why (--reason): the holder reads it in the audit log")
	}
	canon, err := e.canonical(nil, []string{path})
	if err != nil {
		return nil, err
	}
	why := "released by " + by + ": " + reason
	out, err := e.p.DB.ForceReleaseFile(ctx, canon[0], why)
	if err != nil {
		return nil, err
	}
	shared, err := e.team.s.ForceReleaseFile(ctx, canon[0], why)
	if err != nil {
		return nil, e.teamErr(err)
	}
	for _, c := range shared {
		if c.Clone != e.team.s.Clone() {
			out = append(out, e.teamClaims([]coord.FileClaim{c})...)
		}
	}
	if len(out) == 0 {
		return nil, refuse(ErrNotFound, "not_claimed", "no live claim of %s: snag files lists the claims as they are named", canon[0])
	}
	for _, c := range out {
		e.Audit(ctx, snag.AuditEntry{SessionID: c.SessionID, Actor: queue.Person, Agent: by, Action: "files_release",
			Outcome: "ok", Detail: c.Holder + ": " + c.Path + ": " + why})
	}
	e.hub.Publish(snag.FilesEvent{Released: canon, By: by})
	return out, nil
}
