package engine

import (
	"context"
	"errors"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/snag"
)

// File claims are the file claims service's (internal/engine/fileclaims):
// the engine keeps the live state's side of them (seam_fileclaims.go),
// and the list of every live claim, which its own reads show.

// ErrFilesHeld: a file claim overlaps another agent's live claim.
var ErrFilesHeld = errors.New("files held")

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
