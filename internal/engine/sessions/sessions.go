// Package sessions is the life of an agent's session beside the engine:
// the streams a session holds open, the grace that ends a session whose
// last stream closed and did not come back (or that did not reconnect
// after a restart), and the sweep that ends the sessions whose processes
// are gone.
//
// The session rows and the moves on them (register, adopt a name, end a
// session and give its tasks back) are the engine's; this service decides
// when a session ends and asks the engine to end it, over the small seam it
// declares (Engine). It must not import the engine's other services, nor a
// transport: snagd's handlers call it (StreamOpened, StreamClosed).
package sessions

import (
	"context"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/proc"
)

// Engine is what the service needs of the engine (*engine.Engine
// satisfies it).
type Engine interface {
	// WaitReady returns once the first full rescan is done, or ctx ends.
	WaitReady(ctx context.Context) error
	// LiveSessions returns the sessions that have not ended.
	LiveSessions(ctx context.Context) ([]index.Session, error)
	// EndSession ends a session and gives back every task it held.
	EndSession(id int64, why string)
	// FollowBranch records the branch live session s works on, when it
	// has changed.
	FollowBranch(ctx context.Context, s index.Session)
	// RestoreIndex writes snag.db again when it was deleted or moved away.
	RestoreIndex(ctx context.Context)
	// CountSweep counts a sweep done (Progress.Sweeps).
	CountSweep()
}

// Options configure the service. Both durations must be positive.
type Options struct {
	// Grace is how long a session whose stream closed (or that has not
	// reconnected after a restart) keeps its leases.
	Grace time.Duration
	// Sweep is how often the processes of sessions are checked.
	Sweep time.Duration
}

// Service keeps the streams of each session and ends sessions: after the
// grace when their last stream closed, and at a sweep when their process
// is gone. It is safe for concurrent use. Run sweeps; Close stops the
// grace timers.
type Service struct {
	e    Engine
	opts Options

	// mu guards the counts of open streams and the grace timers; a timer
	// that fires takes it to see whether a stream came back meanwhile.
	mu      sync.Mutex
	open    map[int64]int
	timers  map[int64]*time.Timer
	held    map[int64]time.Time // when each session Hold keeps ends
	whys    map[int64]string    // why each session ends when its timer fires
	stopped bool                // Close was called: no grace starts
}

// New returns the sessions service of engine e.
func New(e Engine, opts Options) *Service {
	return &Service{e: e, opts: opts, open: map[int64]int{}, timers: map[int64]*time.Timer{}, held: map[int64]time.Time{}, whys: map[int64]string{}}
}

// StreamOpened records that a client holds a stream of session id open:
// the session lives while one does.
func (s *Service) StreamOpened(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open[id]++
	if t, ok := s.timers[id]; ok {
		t.Stop()
		delete(s.timers, id)
	}
}

// StreamClosed records that a stream of session id has closed. When no
// stream of it comes back within the grace, the session ends and its
// tasks go back to the queue.
func (s *Service) StreamClosed(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[id]--; s.open[id] > 0 {
		return
	}
	delete(s.open, id)
	s.arm(id, "stream closed")
}

// Adopt gives session id, live from before a restart, the grace to
// reconnect: the engine calls it at its first rescan (engine.OnAdopt), for
// a daemon restart or a blip must not cost an agent its leases. A session
// no stream holds (an agent known by its handle, expires set) keeps the
// time it had left, and at least the grace.
func (s *Service) Adopt(id int64, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !expires.IsZero() {
		s.holdLocked(id, max(time.Until(expires), s.opts.Grace))
		return
	}
	s.arm(id, "did not reconnect after a restart")
}

// Hold keeps session id, which no stream holds (an agent known by its
// handle), alive for idle from now: it ends then unless Hold is called
// again first. Every call that names one of its handles holds it anew.
func (s *Service) Hold(id int64, idle time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdLocked(id, idle)
}

// holdLocked (re)starts the idle clock of session id. s.mu is held.
func (s *Service) holdLocked(id int64, idle time.Duration) {
	if s.stopped {
		return
	}
	if t, ok := s.timers[id]; ok {
		t.Stop()
	}
	s.held[id] = time.Now().Add(idle)
	s.start(id, idle, "idle: no call named its handle for "+idle.Round(time.Second).String())
}

// HeldUntil is when session id, kept by Hold, ends unless a call names
// it first; false for a session Hold does not keep.
func (s *Service) HeldUntil(id int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.held[id]
	return t, ok
}

// arm starts the grace of session id, which has no stream open, unless
// one runs already; when it ends with no stream back, the session ends
// for why. s.mu is held.
func (s *Service) arm(id int64, why string) {
	if _, ok := s.timers[id]; ok || s.open[id] > 0 || s.stopped {
		return
	}
	s.start(id, s.opts.Grace, why)
}

// start sets the timer of session id: after d, unless another timer took
// its place or a stream came back, the session ends for why. s.mu is
// held.
func (s *Service) start(id int64, d time.Duration, why string) {
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		s.mu.Lock()
		still := s.timers[id] == t
		why := s.whys[id]
		if still {
			delete(s.timers, id)
			delete(s.held, id)
			delete(s.whys, id)
		}
		back := s.open[id] > 0 && why != "process gone" // a stream of a gone process is no one's
		s.mu.Unlock()
		if still && !back {
			s.e.EndSession(id, why)
		}
	})
	s.timers[id], s.whys[id] = t, why
}

// gone ends session id, whose process is gone, once the grace has run,
// or when the grace that runs already (its stream closed as the process
// exited) is over, for that reason:
// within it, the agent's restarted bridge may still name its lease by its
// handle and take it back.
func (s *Service) gone(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held := s.held[id]
	switch _, running := s.timers[id]; {
	case s.stopped || held:
	case running:
		s.whys[id] = "process gone" // known now: the grace running ends it for that
	default:
		s.start(id, s.opts.Grace, "process gone")
	}
}

// StreamOpen reports whether session id has a stream open.
func (s *Service) StreamOpen(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[id] > 0
}

// Streams is how many sessions have a stream open.
func (s *Service) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// Close stops the grace timers: no session ends for its grace from here.
// A sweep stops with Run's context.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for id, t := range s.timers {
		t.Stop()
		delete(s.timers, id)
	}
	return nil
}

// Run sweeps, from the end of the engine's first rescan and then every
// Options.Sweep, until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	if s.e.WaitReady(ctx) != nil {
		return nil
	}
	t := time.NewTicker(s.opts.Sweep)
	defer t.Stop()
	for {
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sweep ends the sessions whose process is gone, after the grace (gone):
// the pid with the start time it registered with, so a reused pid is not
// taken for the agent. A
// session of another host or boot is never swept, only shown. A session
// that lives has the branch it works on recorded. The sweep also writes
// snag.db again if it went away, as a watcher that polls sees no removal.
// Once ctx ends it ends no more sessions: snagd is stopping, and those
// whose processes are gone are ended by the next start's sweep.
func (s *Service) sweep(ctx context.Context) {
	s.e.RestoreIndex(ctx)
	ss, err := s.e.LiveSessions(ctx)
	if err == nil {
		for _, l := range ss {
			if ctx.Err() != nil {
				return // stopping: the next start's sweep ends the rest
			}
			if !proc.Alive(l.PID, l.PIDStart, l.BootID) {
				s.gone(l.ID)
			} else {
				s.e.FollowBranch(ctx, l)
			}
		}
	}
	s.e.CountSweep()
}
