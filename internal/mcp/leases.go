package mcp

import (
	"fmt"
	"sync"

	"github.com/snagdev/snag/internal/queue"
)

// Leases is the book a live backend keeps of the leases its session
// holds: each lease's epoch, found by its task's id or key, so Release and
// Resolve take only the task. The zero value is empty and ready; it is
// safe for concurrent use.
type Leases struct {
	mu sync.Mutex
	m  map[string]held // task id and key -> the lease held
}

type held struct {
	id, key string
	epoch   int64
}

// Hold records the lease on the task id (alias key) with its epoch.
func (l *Leases) Hold(id, key string, epoch int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]held{}
	}
	h := held{id: id, key: key, epoch: epoch}
	l.m[id], l.m[key] = h, h
}

// Epoch is the epoch of the lease held on ref (an id or a key), or 0.
func (l *Leases) Epoch(ref string) int64 {
	r, err := queue.ParseRef(ref)
	if err != nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.ID == "" {
		return l.m[r.String()].epoch
	}
	return l.m[r.ID].epoch
}

// Forget drops the lease held on a task, named by ref or key, under both
// its names; the other leases stay (epochs count per task, so two tasks'
// leases often share one).
func (l *Leases) Forget(ref, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, name := range []string{ref, key} {
		if h, ok := l.m[name]; ok {
			delete(l.m, h.id)
			delete(l.m, h.key)
		}
	}
}

// Clear forgets every lease: the session that held them has ended.
func (l *Leases) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.m)
}

// NotHeld is the error of a write on a task the session holds no lease on:
// it says how to get one.
func NotHeld(ref string) error {
	return fmt.Errorf("you do not hold %s here: a lease claimed in another request or on another connection is named by "+
		"the handle snag_claim answered ({\"id\": %q, \"handle\": \"lh_...\"}; a task handed to you, by your agent handle); "+
		"else claim it first with snag_claim {\"id\": %q}", ref, ref, ref)
}
