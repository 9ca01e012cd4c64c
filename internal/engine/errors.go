package engine

import (
	"errors"
	"fmt"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// The kinds of refusal. Every error the engine returns for a request it
// will not carry out wraps one of these; errors.Is tells them apart. A
// refusal is an *Error, whose message names the fix.
var (
	// ErrNotFound: no task, or no session, by that reference.
	ErrNotFound = index.ErrNotFound
	// ErrHeld: another session holds the task.
	ErrHeld = index.ErrHeld
	// ErrStale: the caller's lease has ended (its epoch is old).
	ErrStale = index.ErrStale
	// ErrTransition: the status machine has no such move from where the task is.
	ErrTransition = queue.ErrTransition
	// ErrBlocked: the task depends on tasks not yet resolved.
	ErrBlocked = errors.New("blocked")
	// ErrMissing: the task's file has left tasks/ while it was held.
	ErrMissing = errors.New("missing")
	// ErrHolding: the session already holds as many tasks as it may.
	ErrHolding = errors.New("holding")
	// ErrNotHeld: the move needs a holder, and the caller is not it.
	ErrNotHeld = errors.New("not held")
	// ErrSessionEnded: the session has ended; its client registers again.
	ErrSessionEnded = errors.New("session ended")
	// ErrInvalid: the request itself is wrong (a missing reason, an
	// unknown kind ...); sending it again unchanged fails again.
	ErrInvalid = errors.New("invalid")
	// ErrCannotVerify: nothing can check the task (no command, no page).
	ErrCannotVerify = errors.New("nothing can verify")
	// ErrStarting: snagd is still starting (in team mode, its leases are
	// being reconciled with the coordination store); asking again in a
	// moment works.
	ErrStarting = errors.New("starting")
	// ErrTooLarge: what was sent is over a bound (a capture's screenshot);
	// it must be made smaller.
	ErrTooLarge = errors.New("too large")
)

// Error is a refusal: its kind (one of the sentinels above), the code a
// program branches on, and a sentence for a person or a model that says
// what went wrong and what to do.
type Error struct {
	Kind    error
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the kind, so errors.Is(err, ErrHeld) holds for a refusal of that kind.
func (e *Error) Unwrap() error { return e.Kind }

// refuse makes a refusal of kind with code and a formatted message.
func refuse(kind error, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}
