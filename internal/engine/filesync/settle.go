package filesync

import (
	"maps"
	"slices"
	"time"
)

// The second looks: the engine, applying a batch under its write lock,
// finds a task file that reads as missing or broken while its row is good
// (an editor truncates and rewrites in place), and has the service look
// at it again once it has had time to settle (engine.Settler). Each look
// is a timer of its own; when it fires, the engine reads the file again
// (LookAgain). The engine counts the looks made due and those taken or
// called off (engine.Progress).

// Later makes a look at name due once it has settled, or puts off the one
// due. due says a look was made due that was not: a new one, or one whose
// timer had fired (it looks again).
func (s *Service) Later(name string) (due bool) {
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	if s.stopped {
		return false
	}
	if t, ok := s.settling[name]; ok {
		return !t.Reset(s.settle)
	}
	s.settling[name] = time.AfterFunc(s.settle, func() {
		s.settleMu.Lock()
		delete(s.settling, name)
		s.settleMu.Unlock()
		s.e.LookAgain(name)
	})
	return true
}

// Settling reports whether name waits for a second look: it was seen
// missing or broken less than the settle time ago.
func (s *Service) Settling(name string) bool {
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	_, ok := s.settling[name]
	return ok
}

// Cancel calls off the look at name; calledOff says one was due and its
// timer had not fired.
func (s *Service) Cancel(name string) (calledOff bool) {
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	t, ok := s.settling[name]
	if !ok {
		return false
	}
	delete(s.settling, name)
	return t.Stop()
}

// Names are the files that wait for a second look.
func (s *Service) Names() []string {
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	return slices.Collect(maps.Keys(s.settling))
}

// Stop calls off every look due, for good, and says how many timers it
// stopped before they fired. The engine calls it as it closes.
func (s *Service) Stop() (calledOff int) {
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	s.stopped = true
	for name, t := range s.settling {
		if t.Stop() {
			calledOff++
		}
		delete(s.settling, name)
	}
	return calledOff
}
