package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
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
	d.w.Sessions.StreamOpened(id)
	defer d.w.Sessions.StreamClosed(id)
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
