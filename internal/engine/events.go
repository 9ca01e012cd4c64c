package engine

import (
	"sync"

	"github.com/snagdev/snag/internal/snag"
)

// Event is one change the engine announces (snagd serves them on /events).
type Event struct {
	ID   int64      `json:"id"`
	Type string     `json:"type"` // Data.Kind()
	Data snag.Event `json:"data"` // one of snag's event kinds

}

// Hub keeps the most recent events in a ring, so a client that reconnects
// with Last-Event-ID gets what it missed, and wakes every subscriber when
// one is published. It is safe for concurrent use.
type Hub struct {
	mu     sync.Mutex
	next   int64
	ring   []Event // oldest first, at most size
	size   int
	notify chan struct{} // closed and replaced on every publish
}

func newHub(size int) *Hub {
	return &Hub{next: 1, size: size, notify: make(chan struct{})}
}

// Publish announces ev, under its kind, and returns it.
func (h *Hub) Publish(ev snag.Event) Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := Event{ID: h.next, Type: ev.Kind(), Data: ev}
	h.next++
	h.ring = append(h.ring, e)
	if len(h.ring) > h.size {
		h.ring = h.ring[len(h.ring)-h.size:]
	}
	close(h.notify)
	h.notify = make(chan struct{})
	return e
}

// Since returns the events after id and a channel closed at the next
// publish. gap is set when events after id have already left the ring.
func (h *Hub) Since(id int64) (events []Event, wait <-chan struct{}, gap bool) {
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

// Last is the id of the latest event.
func (h *Hub) Last() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next - 1
}
