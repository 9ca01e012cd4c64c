package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/snagdev/snag/internal/ops"
)

// serveEvents streams server-sent events until the client goes or ctx
// ends. A client resumes with the Last-Event-ID header (or ?since=N); when
// what it missed is gone from the ring it gets a "resync" event and should
// reload what it shows.
func (d *Daemon) serveEvents(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	h := d.e.Events()
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, &apiError{Status: http.StatusInternalServerError, Code: "no_stream", Message: "streaming is not supported here"})
		return
	}
	var q struct {
		Since *int64 `query:"since" max:"4611686018427387904"`
	}
	if err := ops.DecodeQuery(r.URL.Query(), &q); err != nil {
		writeError(w, err.(*apiError))
		return
	}
	from := h.Last()
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		from, _ = strconv.ParseInt(s, 10, 64)
	} else if q.Since != nil {
		from = *q.Since
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": snagd events from %d\n\n", from)
	fl.Flush()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		events, wait, gap := h.Since(from)
		if gap {
			fmt.Fprintf(w, "event: resync\ndata: {}\n\n")
		}
		for _, e := range events {
			data, _ := json.Marshal(e.Data)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, data)
			from = e.ID
		}
		fl.Flush()
		select {
		case <-ctx.Done():
			return
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case <-wait:
		}
	}
}
