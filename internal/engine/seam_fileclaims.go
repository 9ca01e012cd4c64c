package engine

import (
	"context"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/repopath"
	"github.com/snagdev/snag/internal/snag"
)

// The seam of the file claims service (internal/engine/fileclaims): the
// service keeps the policy (which paths a claim may name, in which
// canonical form, and each refusal's words) and snag.db's side of the
// claims; the engine keeps the live state's side, whose link to the other
// members (the repository's other worktrees, a team's other clones) it
// owns: a claim made there first, the outbox's release of what snag.db
// did not take, and a person's release on every member. FileClaims
// (files.go) lists them all.

// ClaimSharedFiles claims r's paths for session s in the live state, all
// or nothing, across every member (globs compared by repopath.Overlap).
// It answers the claims in the way, worded as snag.db's (another clone's
// holder named with its machine), or a refusal: the store out of reach,
// or this clone not yet reconciled with it.
func (e *Engine) ClaimSharedFiles(ctx context.Context, s index.Session, r index.FileClaimRequest) ([]snag.FileClaim, error) {
	if err := e.teamReady(ctx); err != nil {
		return nil, err
	}
	shared, err := e.team.s.ClaimFiles(ctx, coord.FilesRequest{Session: coordSession(s), Paths: r.Paths, TaskID: r.TaskID,
		TTL: r.TTL, Exclusive: r.Exclusive}, repopath.Overlap)
	if err != nil {
		return nil, e.teamErr(err)
	}
	if len(shared.Conflicts) > 0 {
		return e.teamClaims(shared.Conflicts), nil
	}
	return nil, nil
}

// UnshareFiles queues for the live state the end of session's claims of
// paths (every claim it holds there when paths is empty); why says why.
// The outbox's sender delivers it.
func (e *Engine) UnshareFiles(session int64, paths []string, why string) {
	e.team.queue(teamOp{files: &teamFiles{session: session, paths: paths}, why: why})
}

// ForceReleaseSharedFile frees path from whoever claims it in the live
// state, why says why, and answers the claims it ended on other clones
// (this clone's are snag.db's), worded as snag.db's.
func (e *Engine) ForceReleaseSharedFile(ctx context.Context, path, why string) ([]snag.FileClaim, error) {
	shared, err := e.team.s.ForceReleaseFile(ctx, path, why)
	if err != nil {
		return nil, e.teamErr(err)
	}
	var out []snag.FileClaim
	for _, c := range shared {
		if c.Clone != e.team.s.Clone() {
			out = append(out, e.teamClaims([]coord.FileClaim{c})...)
		}
	}
	return out, nil
}
