package sessions

import (
	"context"
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

	s.Adopt(2)
	if !armed(2) {
		t.Error("no grace started for session 2, adopted after a restart")
	}
	s.Adopt(1)
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
