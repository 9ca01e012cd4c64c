package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/snagdev/snag/internal/index"
)

// TestL3_AnEndedSessionIsRefused: a session looked up (and so kept) is
// refused as ended once it has ended, and a lookup that read the row
// before the end does not keep it alive.
func TestL3_AnEndedSessionIsRefused(t *testing.T) {
	e := open(t, sample(t))
	ctx := context.Background()
	s, err := e.Register(ctx, index.Session{Name: "VESPER", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is answered from memory
		if got, err := e.Session(ctx, s.ID); err != nil || got.ID != s.ID || got.Name != "VESPER" {
			t.Fatalf("Session(%d): %+v, %v; want VESPER", s.ID, got, err)
		}
	}
	_, _, ends := e.live.lookup(s.ID)
	e.EndSession(s.ID, "test")
	if _, err := e.Session(ctx, s.ID); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("Session after its end: %v; want ErrSessionEnded", err)
	}
	e.live.keep(s, ends) // a read of the row made before the end
	if _, err := e.Session(ctx, s.ID); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("Session after a read from before its end was kept: %v; want ErrSessionEnded", err)
	}
}
