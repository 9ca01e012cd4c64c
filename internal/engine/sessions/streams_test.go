package sessions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/index"
)

// ends is an Engine that records the sessions asked to end; the tests
// here never let a grace run out, so it should record none.
type ends struct{ ended []int64 }

func (*ends) WaitReady(context.Context) error                       { return nil }
func (*ends) LiveSessions(context.Context) ([]index.Session, error) { return nil, nil }
func (e *ends) EndSession(id int64, _ string)                       { e.ended = append(e.ended, id) }
func (*ends) FollowBranch(context.Context, index.Session)           {}
func (*ends) RestoreIndex(context.Context)                          {}
func (*ends) CountSweep()                                           {}

// A stream back within the grace stops it; a second stream of a session
// keeps it alive when the first closes; Close stops every grace.
func TestAStreamBackWithinTheGraceKeepsTheSession(t *testing.T) {
	e := &ends{}
	s := New(e, Options{Grace: time.Hour, Sweep: time.Hour})
	armed := func(id int64) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.timers[id]
		return ok
	}

	s.StreamOpened(1)
	s.StreamClosed(1)
	if !armed(1) {
		t.Fatal("no grace started when session 1's only stream closed")
	}
	s.StreamOpened(1)
	if armed(1) {
		t.Error("session 1's grace still runs after its stream came back")
	}

	s.StreamOpened(1)
	s.StreamClosed(1)
	if armed(1) || !s.StreamOpen(1) {
		t.Errorf("session 1 with one of two streams closed: grace %v, StreamOpen %v; want no grace, open", armed(1), s.StreamOpen(1))
	}

	s.Adopt(2, time.Time{})
	if !armed(2) {
		t.Error("no grace started for session 2, adopted after a restart")
	}
	s.Adopt(1, time.Time{})
	if armed(1) {
		t.Error("a grace started for session 1, adopted with a stream open")
	}

	s.Close()
	if armed(2) {
		t.Error("session 2's grace still runs after Close")
	}
	s.StreamClosed(1)
	if armed(1) {
		t.Error("a grace started after Close")
	}
	if len(e.ended) != 0 {
		t.Errorf("sessions %v ended; want none", e.ended)
	}
}

// endSignal is an Engine that says on a channel which session it was
// asked to end, and why.
type endSignal struct {
	ends
	ch chan string
}

func (e *endSignal) EndSession(id int64, why string) { e.ch <- fmt.Sprint(id, ": ", why) }

// A session no stream holds (an agent known by its handle) ends when its
// idle time runs out; Hold again starts that time over, a stream that
// opens and closes does not end it early, and an adopted one keeps what
// it had left.
func TestAHeldSessionEndsWhenIdle(t *testing.T) {
	e := &endSignal{ch: make(chan string, 4)}
	s := New(e, Options{Grace: time.Hour, Sweep: time.Hour})
	defer s.Close()

	start := time.Now()
	s.Hold(1, 200*time.Millisecond)
	s.Hold(1, 400*time.Millisecond) // a call named it: the clock starts over
	got := <-e.ch
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Errorf("session 1 ended after %v, before the idle time Hold set again (400ms)", took)
	}
	if !strings.HasPrefix(got, "1: idle: ") {
		t.Errorf("ended %q, want session 1 for being idle", got)
	}

	s.Adopt(2, time.Now().Add(-time.Minute)) // expired while snagd was down: the grace
	s.mu.Lock()
	_, armed := s.timers[2]
	s.mu.Unlock()
	if !armed {
		t.Error("session 2, adopted with its idle time run out, got no grace")
	}
	select {
	case got := <-e.ch:
		t.Errorf("%q ended; an adopted session gets at least the grace (1h)", got)
	default:
	}
}

// A session whose process is gone ends after the grace, for that reason,
// even with a stream still open (a stream of a gone process is no one's),
// and a grace already running ends it for that reason too.
func TestAGoneProcessEndsAfterTheGrace(t *testing.T) {
	e := &endSignal{ch: make(chan string, 4)}
	s := New(e, Options{Grace: 50 * time.Millisecond, Sweep: time.Hour})
	defer s.Close()
	s.StreamOpened(1)
	s.gone(1)
	s.StreamOpened(2)
	s.StreamClosed(2) // its grace runs ("stream closed")
	s.gone(2)
	got := map[string]bool{<-e.ch: true, <-e.ch: true}
	if !got["1: process gone"] || !got["2: process gone"] {
		t.Errorf("ended %v; want sessions 1 and 2 for process gone", got)
	}
}
