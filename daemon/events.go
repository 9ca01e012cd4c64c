package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Event is one change snagd announces on /events.
type Event struct {
	ID   int64  `json:"id"`
	Type string `json:"type"` // task, lease, session, problem, rescan
	Data any    `json:"data"`
}

// hub keeps the most recent events in a ring, so a client that reconnects
// with Last-Event-ID gets what it missed, and wakes every subscriber when
// one is published. It is safe for concurrent use.
type hub struct {
	mu     sync.Mutex
	next   int64
	ring   []Event // oldest first, at most size
	size   int
	notify chan struct{} // closed and replaced on every publish
}

func newHub(size int) *hub {
	return &hub{next: 1, size: size, notify: make(chan struct{})}
}

func (h *hub) publish(typ string, data any) Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := Event{ID: h.next, Type: typ, Data: data}
	h.next++
	h.ring = append(h.ring, e)
	if len(h.ring) > h.size {
		h.ring = h.ring[len(h.ring)-h.size:]
	}
	close(h.notify)
	h.notify = make(chan struct{})
	return e
}

// since returns the events after id and a channel closed at the next
// publish. gap is set when events after id have already left the ring.
func (h *hub) since(id int64) (events []Event, wait <-chan struct{}, gap bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ring) > 0 && id+1 < h.ring[0].ID {
		gap = true
	}
	for _, e := range h.ring {
		if e.ID > id {
			events = append(events, e)
		}
	}
	return events, h.notify, gap
}

func (h *hub) last() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next - 1
}

// serveEvents streams server-sent events until the client goes or ctx
// ends. A client resumes with the Last-Event-ID header (or ?since=N); when
// what it missed is gone from the ring it gets a "resync" event and should
// reload what it shows.
func (h *hub) serveEvents(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, &apiError{http.StatusInternalServerError, "no_stream", "streaming is not supported here"})
		return
	}
	q := readQuery(r, "since")
	since := q.int("since", 0, 1<<62, -1)
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	from := h.last()
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		from, _ = strconv.ParseInt(s, 10, 64)
	} else if since >= 0 {
		from = int64(since)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": snagd events from %d\n\n", from)
	fl.Flush()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		events, wait, gap := h.since(from)
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
