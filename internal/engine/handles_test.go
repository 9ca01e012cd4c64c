package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// Handles in process: what each kind names, refused when foreign, stale or
// unknown with words that say what to do; a lease taken back by a new
// session; a rotated credential's agents ended.
func TestHandles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := open(t, sample(t))
	agent, err := e.Register(ctx, index.Session{Client: "test", Transport: "http", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Claim(ctx, agent, nil, false)
	if err != nil || got.Task == nil {
		t.Fatalf("claim: %v %+v", err, got)
	}
	lease, err := e.MintHandle(ctx, index.HandleLease, agent.ID, got.Task.ID, got.Epoch, "local:a")
	if err != nil {
		t.Fatal(err)
	}
	who, err := e.MintHandle(ctx, index.HandleAgent, agent.ID, "", 0, "local:a")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(lease, "lh_") || !strings.HasPrefix(who, "ah_") || len(lease) < 3+24 {
		t.Fatalf("handles %q, %q: want lh_ and ah_ with 144 random bits", lease, who)
	}

	refused := func(what, h, cred string, kind error, words string) {
		t.Helper()
		_, _, err := e.Handle(ctx, h, cred)
		if !errors.Is(err, kind) || !strings.Contains(err.Error(), words) {
			t.Errorf("%s: %v; want %v saying %q", what, err, kind, words)
		}
	}
	for _, c := range []struct{ h, kind string }{{lease, index.HandleLease}, {who, index.HandleAgent}} {
		h, owner, err := e.Handle(ctx, c.h, "local:a")
		if err != nil || h.Kind != c.kind || h.SessionID != agent.ID || owner.ID != agent.ID || owner.Expires.IsZero() {
			t.Errorf("%s handle: %+v of %+v, %v", c.kind, h, owner, err)
		}
	}
	refused("another credential's", lease, "hosted:b", ErrForeign, "another credential")
	refused("one never made", "lh_AAAAAAAAAAAAAAAAAAAAAAAA", "local:a", ErrStale, "not one this snagd made")

	// A new session of the same agent takes the lease back: the handle's
	// epoch goes with it, the old one is stale.
	bridge, err := e.Register(ctx, index.Session{Client: "test", Transport: "stdio"})
	if err != nil {
		t.Fatal(err)
	}
	h, _, _ := e.Handle(ctx, lease, "local:a")
	moved, err := e.TakeBack(ctx, queue.Ref{ID: h.TaskID}, h.Epoch, agent, bridge)
	if err != nil || moved.SessionID != bridge.ID || moved.Epoch <= h.Epoch {
		t.Fatalf("take back: %+v, %v", moved, err)
	}
	if _, err := e.TakeBack(ctx, queue.Ref{ID: h.TaskID}, h.Epoch, agent, bridge); err == nil {
		t.Error("a second take back at the old epoch was not refused")
	}
	refused("a lease handle whose lease moved on", lease, "local:a", ErrStale, "snag_claim")

	// An ended agent's handle says so, and why.
	gone, _ := e.Register(ctx, index.Session{Client: "test", Transport: "http", Expires: time.Now().Add(time.Hour)})
	goneH, _ := e.MintHandle(ctx, index.HandleAgent, gone.ID, "", 0, "local:a")
	e.EndSession(gone.ID, "idle: no call named its handle for 30m0s")
	refused("an ended agent's", goneH, "local:a", ErrStale, "has ended (idle")

	// A rotated credential ends the agents known only by its handles.
	n, err := e.RevokeHandles(ctx, "local:a")
	if err != nil || n != 1 {
		t.Fatalf("revoke: %d agents ended, %v; want 1", n, err)
	}
	if s, err := e.p.DB.SessionByID(ctx, agent.ID); err != nil || s.Ended.IsZero() {
		t.Errorf("the agent known by a revoked handle is live: %+v %v", s, err)
	}
	refused("a revoked handle", who, "local:a", ErrStale, "not one this snagd made")
}
