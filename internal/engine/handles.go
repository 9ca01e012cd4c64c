package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// DefaultHandleIdle is how long an agent known by its handle (one that no
// connection stands for: MCP 2026-07-28 over HTTP) lives without a call
// that names one of its handles. Its leases end with it.
const DefaultHandleIdle = 30 * time.Minute

// ErrForeign: a handle made with another credential than the caller's.
var ErrForeign = errors.New("foreign handle")

// The handles' prefixes say which kind an agent holds; what follows is 144
// random bits.
const (
	leasePrefix = "lh_"
	agentPrefix = "ah_"
)

// HashHandle is the hash a handle is kept as.
func HashHandle(h string) string {
	sum := sha256.Sum256([]byte(h))
	return hex.EncodeToString(sum[:])
}

// MintHandle makes a handle of kind (index.HandleLease, naming the lease
// of taskID at epoch; index.HandleAgent, naming the session) for session
// id, bound to cred, and returns it. Only its hash is kept.
func (e *Engine) MintHandle(ctx context.Context, kind string, id int64, taskID string, epoch int64, cred string) (string, error) {
	b := make([]byte, 18)
	rand.Read(b)
	prefix := agentPrefix
	if kind == index.HandleLease {
		prefix = leasePrefix
	}
	h := prefix + base64.RawURLEncoding.EncodeToString(b)
	err := e.p.DB.AddHandle(ctx, index.Handle{Hash: HashHandle(h), Kind: kind, SessionID: id, TaskID: taskID, Epoch: epoch, Cred: cred})
	if err != nil {
		return "", err
	}
	return h, nil
}

// Handle reads the handle h for a caller holding cred: what it names, once
// that is still live, and the agent's live session. A handle snagd never made, one made with another
// credential, one whose agent has ended and one whose lease has ended are
// each refused with what to do instead.
func (e *Engine) Handle(ctx context.Context, h, cred string) (index.Handle, index.Session, error) {
	var s index.Session
	got, err := e.p.DB.HandleOf(ctx, HashHandle(strings.TrimSpace(h)))
	switch {
	case errors.Is(err, index.ErrNoHandle):
		return got, s, refuse(ErrStale, "stale_handle", "the handle %s is not one this snagd made, or what it named has ended: "+
			"snag_claim takes a task anew (and answers a new handle)", clipHandle(h))
	case err != nil:
		return got, s, err
	case got.Cred != cred:
		return got, s, refuse(ErrForeign, "foreign_handle", "the handle %s was made with another credential than this request's "+
			"(another token, or one rotated since): use the handles your own calls answered, or snag_claim anew", clipHandle(h))
	}
	s, err = e.p.DB.SessionByID(ctx, got.SessionID)
	if err != nil || !s.Ended.IsZero() {
		why := "it is gone"
		if err == nil {
			why = s.EndReason
		}
		if got.Kind == index.HandleLease {
			key := e.keyOf(ctx, got.TaskID)
			return got, s, refuse(ErrStale, "stale_handle", "your lease of %s ended with its agent (%s): snag_get %s says where it is; "+
				"snag_claim {\"id\": %q} takes it again if it is open", key, why, key, key)
		}
		return got, s, refuse(ErrStale, "stale_handle", "the agent of the handle %s has ended (%s) and its leases went back: "+
			"snag_claim takes a task anew", clipHandle(h), why)
	}
	if got.Kind != index.HandleLease {
		return got, s, nil
	}
	l, err := e.p.DB.LeaseOf(ctx, got.TaskID)
	if err == nil && l.Epoch == got.Epoch && l.SessionID == got.SessionID {
		return got, s, nil
	}
	if err != nil && !errors.Is(err, index.ErrNoLease) {
		return got, s, err
	}
	// The row stays (until its agent ends): a take-back in flight moves it
	// with the lease, and a stale one says so each time it is named.
	key := e.keyOf(ctx, got.TaskID)
	return got, s, refuse(ErrStale, "stale_handle", "your lease of %s under this handle has ended (released, resolved, handed off "+
		"or taken back by a person): snag_get %s says where it is; snag_claim {\"id\": %q} takes it again if it is open", key, key, key)
}

// keyOf is the key of task id, or the id when it cannot be read.
func (e *Engine) keyOf(ctx context.Context, id string) string {
	if it, err := e.Get(ctx, queue.Ref{ID: id}); err == nil {
		return it.Key
	}
	return id
}

// clipHandle is the start of a handle, enough to tell which one an error
// means without repeating the secret.
func clipHandle(h string) string {
	if len(h) > 9 {
		return h[:9] + "…"
	}
	return h
}

// Hold records that session id, an agent known by its handle, lives until
// at (unless a call names it again): a restart gives it what is left.
func (e *Engine) Hold(ctx context.Context, id int64, at time.Time) error {
	return e.p.DB.SetExpires(ctx, id, at)
}

// RevokeHandles forgets every handle made with cred (a token rotated) and
// ends the agents known only by them: their leases go back to the queue.
// It answers how many agents ended.
func (e *Engine) RevokeHandles(ctx context.Context, cred string) (int, error) {
	ids, err := e.p.DB.RevokeHandles(ctx, cred)
	if err != nil {
		return 0, err
	}
	return e.endRevoked(ctx, ids), nil
}

// RevokeHandlesBut forgets every handle made with a credential of kind
// ("local:", "hosted:") but keep, the one in force (a token replaced while
// snagd was down), and ends the agents known only by them. It answers how
// many agents ended.
func (e *Engine) RevokeHandlesBut(ctx context.Context, kind, keep string) (int, error) {
	ids, err := e.p.DB.RevokeHandlesBut(ctx, kind, keep)
	if err != nil {
		return 0, err
	}
	return e.endRevoked(ctx, ids), nil
}

// endRevoked ends the sessions of ids that only their handles held (no
// stream, no process): the agents a revoked token made. It answers how
// many it ended.
func (e *Engine) endRevoked(ctx context.Context, ids []int64) int {
	n := 0
	for _, id := range ids {
		s, err := e.p.DB.SessionByID(ctx, id)
		if err != nil || !s.Ended.IsZero() || s.Expires.IsZero() {
			continue // a stream holds it: its client goes on, its handles are gone
		}
		e.Audit(ctx, snag.AuditEntry{SessionID: id, Actor: queue.System, Agent: s.Name, Action: "session_end",
			Outcome: "ok", Detail: fmt.Sprintf("%s: the token its handles were made with was rotated", s.Name)})
		e.EndSession(id, "its token was rotated")
		n++
	}
	return n
}

// TakeBack moves the live lease of ref at epoch from session from to
// session to, under a new epoch: the agent of a lease handle came back on
// another connection (its bridge restarted). The task's file names the
// new holder, as after a handoff; no message is left.
func (e *Engine) TakeBack(ctx context.Context, ref queue.Ref, epoch int64, from, to index.Session) (index.Lease, error) {
	it, lease, err := e.HandoffLease(ctx, ref.ID, &from)
	if err != nil {
		return lease, err
	}
	if lease.Epoch != epoch {
		return lease, refuse(ErrStale, "stale_handle", "your lease of %s under this handle has ended: snag_claim {\"id\": %q} takes it again if it is open", it.Key, it.Key)
	}
	_, granted, err := e.HandOver(ctx, Handover{Task: it, Lease: lease, From: &from, To: to, Actor: queue.Agent, By: to.Name, Action: "take_back"})
	return granted, err
}

// MoveHandle records that the lease handle h names now stands for its
// lease under h's session and epoch (after TakeBack).
func (e *Engine) MoveHandle(ctx context.Context, h index.Handle) error {
	return e.p.DB.MoveHandle(ctx, h)
}
