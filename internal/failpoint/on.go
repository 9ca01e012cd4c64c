//go:build failpoints

package failpoint

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snagdev/snag/internal/index"
)

// Enabled reports whether this binary was built with the failpoints tag.
const Enabled = true

// point is one armed failpoint.
type point struct {
	op, step string
	nth      int64
	action   string
	sleep    time.Duration
	hits     atomic.Int64
}

// set is the armed points of the process, and what they need to name the
// operation a step belongs to.
type set struct {
	points []*point

	mu       sync.Mutex
	txOp     string         // the operation of the open write transaction
	inflight map[string]int // operations being served
}

var armed atomic.Pointer[set]

// Arm reads Env and arms its failpoints for this process, in place of any
// armed before (their counts start again). Unset or empty, it disarms.
func Arm() error {
	s, err := parse(os.Getenv(Env))
	if err != nil {
		return err
	}
	armed.Store(s)
	return nil
}

// Armed reports whether any failpoint is armed.
func Armed() bool { return armed.Load() != nil }

func parse(spec string) (*set, error) {
	s := &set{inflight: map[string]int{}}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p := &point{nth: 1, action: "kill"}
		rest, action, hasAction := strings.Cut(item, "=")
		if hasAction {
			p.action = action
			if d, ok := strings.CutPrefix(action, "sleep:"); ok {
				var err error
				if p.sleep, err = time.ParseDuration(d); err != nil {
					return nil, fmt.Errorf("%s: %q: bad sleep: %w", Env, item, err)
				}
				p.action = "sleep"
			}
		}
		switch p.action {
		case "kill", "eio", "enospc", "sleep":
		default:
			return nil, fmt.Errorf("%s: %q: unknown action %q (want kill, eio, enospc or sleep:DURATION)", Env, item, p.action)
		}
		rest, nth, hasNth := strings.Cut(rest, "@")
		if hasNth {
			n, err := strconv.ParseInt(nth, 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%s: %q: @%s: want a count from 1", Env, item, nth)
			}
			p.nth = n
		}
		var ok bool
		if p.op, p.step, ok = strings.Cut(rest, ":"); !ok || p.op == "" || p.step == "" {
			return nil, fmt.Errorf("%s: %q: want OP:STEP[@N][=ACTION], as in claim:renamed@2", Env, item)
		}
		s.points = append(s.points, p)
	}
	if len(s.points) == 0 {
		return nil, nil
	}
	return s, nil
}

// Hit reports that op has done step, and fires every armed failpoint whose
// turn it is: it kills the process, sleeps, or returns the error the step
// must fail with.
func Hit(op, step string) error { return armed.Load().hit(op, step) }

func (s *set) hit(op, step string) error {
	if s == nil {
		return nil
	}
	for _, p := range s.points {
		if (p.op != op && p.op != "*") || (p.step != step && p.step != "*") {
			continue
		}
		if p.hits.Add(1) != p.nth {
			continue
		}
		switch p.action {
		case "kill":
			fmt.Fprintf(os.Stderr, "snagd: failpoint %s:%s@%d: killing snagd\n", op, step, p.nth)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL cannot be caught; nothing runs after it
		case "eio":
			return fmt.Errorf("failpoint %s:%s: %w", op, step, syscall.EIO)
		case "enospc":
			return fmt.Errorf("failpoint %s:%s: %w", op, step, syscall.ENOSPC)
		case "sleep":
			fmt.Fprintf(os.Stderr, "snagd: failpoint %s:%s: sleeping %s\n", op, step, p.sleep)
			time.Sleep(p.sleep)
		}
	}
	return nil
}

type opKey struct{}

// WithOp labels ctx with op, the operation whose writes follow, so that
// TxStep and FileStep can name it, and counts op as being served until
// done is called.
func WithOp(ctx context.Context, op string) (_ context.Context, done func()) {
	s := armed.Load()
	if s == nil || op == "" {
		return ctx, func() {}
	}
	s.mu.Lock()
	s.inflight[op]++
	s.mu.Unlock()
	return context.WithValue(ctx, opKey{}, op), func() {
		s.mu.Lock()
		s.inflight[op]--
		s.mu.Unlock()
	}
}

// TxStep is the index's step hook (index.DB.OnStep): a transaction's steps
// belong to the operation its context was labelled with. SQLite lets one
// write transaction be open at a time, so the operation of the open one
// also names the file writes made inside it.
func TxStep(ctx context.Context, step string) error {
	s := armed.Load()
	if s == nil {
		return nil
	}
	op, _ := ctx.Value(opKey{}).(string)
	if op == "" {
		op = "other"
	}
	s.mu.Lock()
	switch step {
	case index.StepBegun:
		s.txOp = op
	case index.StepCommitted, index.StepRolledBack:
		s.txOp = ""
	}
	s.mu.Unlock()
	return s.hit(op, step)
}

// FileStep is the task folder's step hook (taskfs.Dir.OnStep). A write
// outside a transaction (a person's add or move, or the temp file of a
// claim, release or resolve, written before its batch's transaction) belongs
// to the operation of that kind being served; one inside a transaction that
// no request opened (the watcher's, a session's keep-alive) too, when one
// is.
func FileStep(step string) error {
	s := armed.Load()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	op := s.txOp
	if op == "" || op == "other" {
		op = "other"
		for _, o := range []string{"add", "promote", "reject", "cancel", "reopen", "claim", "resolve", "release"} {
			if s.inflight[o] > 0 {
				op = o
				break
			}
		}
	}
	s.mu.Unlock()
	return s.hit(op, step)
}
