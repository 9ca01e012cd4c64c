package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

// stream holds a session alive: the session's client keeps this request
// open for its whole life. When it closes and no other stream of the
// session comes back within the grace, the session ends and its leases are
// released.
func (d *Daemon) stream(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: "bad_session", Message: "session id: want a number"})
		return
	}
	s, err := d.e.Session(r.Context(), id)
	if err != nil {
		writeError(w, &apiError{Status: http.StatusGone, Code: "session_ended", Message: "session has ended: register again"})
		return
	}
	fl, _ := w.(http.Flusher)
	d.e.StreamOpened(id)
	defer d.e.StreamClosed(id)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": session %d (%s)\n\n", s.ID, s.Name)
	if fl != nil {
		fl.Flush()
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.Context().Done():
			return
		case <-tick.C:
			d.e.Touch(context.Background(), id)
			fmt.Fprint(w, ": alive\n\n")
			if fl != nil {
				fl.Flush()
			}
		}
	}
}

func (d *Daemon) claim(ctx context.Context, c *call[claimRequest]) (answer, error) {
	var ref *queue.Ref
	if c.r.PathValue("ref") != "" {
		ref = &c.ref
	}
	got, err := d.e.ClaimWorktree(ctx, *c.session, ref, c.body.Force, c.body.Worktree, c.body.Base)
	if err != nil {
		return answer{}, err
	}
	if got.Task == nil {
		return ok(api.Claim{Reason: got.Reason}), nil
	}
	out := claimed(got.Task, got.Epoch)
	out.Worktree, out.Branch, out.Note = got.Worktree, got.Branch, got.Note
	return ok(out), nil
}

// releaseRequest reads both bodies of POST /tasks/{ref}/release: a
// holder's api.LeaseRequest and a person's api.MoveRequest (no session: By
// names them, and no epoch is needed).
type releaseRequest struct {
	Epoch  int64  `json:"epoch"`
	Reason string `json:"reason"`
	Note   string `json:"note"`
	Commit string `json:"commit"`
	By     string `json:"by"`
}

// release is a holder's release, fenced by its epoch, or a person's taking
// a task back from whoever holds it.
func (d *Daemon) release(ctx context.Context, c *call[releaseRequest]) (answer, error) {
	if c.session == nil {
		got, err := d.e.PersonRelease(ctx, c.ref, c.body.By, c.body.Reason)
		if err != nil {
			return answer{}, err
		}
		return ok(released(got.Key, got.Status)), nil
	}
	got, err := d.e.Release(ctx, *c.session, c.ref, c.body.Epoch, c.body.Reason)
	if err != nil {
		return answer{}, err
	}
	return ok(released(got.Key, got.Status)), nil
}
