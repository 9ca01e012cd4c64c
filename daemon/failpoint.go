package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snagdev/snag/index"
)

// FailpointEnv names the environment variable that arms failpoints, for
// crash tests. Unset (always, outside tests), snagd installs no hook at all.
//
// Its value is a comma-separated list of OP:STEP[@N][=ACTION]:
//
//   - OP is the operation: claim, resolve, release, add, promote, reject,
//     cancel, reopen, register (the HTTP request that makes the write),
//     start (snagd starting), other (a write no request asked for: the
//     watcher, the sweep), or * for any.
//   - STEP is a step of a file write (queue's Step constants: temp-created,
//     temp-written, temp-synced, checked, renamed, linked, temp-removed, dir-synced),
//     of a database transaction (index's: begun, committing, committed,
//     rolled-back), of the start
//     (rebuilding, rebuilt, opened), or * for any.
//   - N fires on the Nth hit of that failpoint only (default 1).
//   - ACTION is kill (the default: SIGKILL at once, no cleanup), eio or
//     enospc (the step fails with that error, as a real one would), or
//     sleep:DURATION.
//
// Example: SNAG_FAILPOINT=claim:renamed@3 kills snagd right after the
// third claim's rename, before its transaction commits.
const FailpointEnv = "SNAG_FAILPOINT"

// failpoint is one armed point.
type failpoint struct {
	op, step string
	nth      int64
	action   string
	sleep    time.Duration
	hits     atomic.Int64
}

// failpoints are the armed points of one snagd, and what they need to name
// the operation a step belongs to.
type failpoints struct {
	points []*failpoint

	mu       sync.Mutex
	txOp     string         // the operation of the open write transaction
	inflight map[string]int // operations of requests being served
}

// failpointsFromEnv reads FailpointEnv; it returns nil when it is unset.
func failpointsFromEnv() (*failpoints, error) {
	spec := os.Getenv(FailpointEnv)
	if spec == "" {
		return nil, nil
	}
	return parseFailpoints(spec)
}

func parseFailpoints(spec string) (*failpoints, error) {
	fps := &failpoints{inflight: map[string]int{}}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		fp := &failpoint{nth: 1, action: "kill"}
		rest, action, hasAction := strings.Cut(item, "=")
		if hasAction {
			fp.action = action
			if d, ok := strings.CutPrefix(action, "sleep:"); ok {
				var err error
				if fp.sleep, err = time.ParseDuration(d); err != nil {
					return nil, fmt.Errorf("%s: %q: bad sleep: %w", FailpointEnv, item, err)
				}
				fp.action = "sleep"
			}
		}
		switch fp.action {
		case "kill", "eio", "enospc", "sleep":
		default:
			return nil, fmt.Errorf("%s: %q: unknown action %q (want kill, eio, enospc or sleep:DURATION)", FailpointEnv, item, fp.action)
		}
		rest, nth, hasNth := strings.Cut(rest, "@")
		if hasNth {
			n, err := strconv.ParseInt(nth, 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%s: %q: @%s: want a count from 1", FailpointEnv, item, nth)
			}
			fp.nth = n
		}
		var ok bool
		if fp.op, fp.step, ok = strings.Cut(rest, ":"); !ok || fp.op == "" || fp.step == "" {
			return nil, fmt.Errorf("%s: %q: want OP:STEP[@N][=ACTION], as in claim:renamed@2", FailpointEnv, item)
		}
		fps.points = append(fps.points, fp)
	}
	if len(fps.points) == 0 {
		return nil, nil
	}
	return fps, nil
}

// hit reports that op has done step, and fires every failpoint whose turn
// it is. It is safe on a nil receiver.
func (fps *failpoints) hit(op, step string) error {
	if fps == nil {
		return nil
	}
	for _, fp := range fps.points {
		if (fp.op != op && fp.op != "*") || (fp.step != step && fp.step != "*") {
			continue
		}
		if fp.hits.Add(1) != fp.nth {
			continue
		}
		switch fp.action {
		case "kill":
			fmt.Fprintf(os.Stderr, "snagd: failpoint %s:%s@%d: killing snagd\n", op, step, fp.nth)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL cannot be caught; nothing runs after it
		case "eio":
			return fmt.Errorf("failpoint %s:%s: %w", op, step, syscall.EIO)
		case "enospc":
			return fmt.Errorf("failpoint %s:%s: %w", op, step, syscall.ENOSPC)
		case "sleep":
			fmt.Fprintf(os.Stderr, "snagd: failpoint %s:%s: sleeping %s\n", op, step, fp.sleep)
			time.Sleep(fp.sleep)
		}
	}
	return nil
}

// install hooks the failpoints into the project's task folder and index.
func (fps *failpoints) install(d *Daemon) {
	if fps == nil {
		return
	}
	d.p.Tasks.OnStep(fps.fileStep)
	d.p.DB.OnStep(fps.txStep)
}

type opKey struct{}

// wrap labels each request's context with the operation it makes, so the
// steps of its writes can be told apart.
func (fps *failpoints) wrap(h http.Handler) http.Handler {
	if fps == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := opOf(r)
		if op == "" {
			h.ServeHTTP(w, r)
			return
		}
		fps.mu.Lock()
		fps.inflight[op]++
		fps.mu.Unlock()
		defer func() {
			fps.mu.Lock()
			fps.inflight[op]--
			fps.mu.Unlock()
		}()
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), opKey{}, op)))
	})
}

// opOf names the operation a request makes, or "" for a read.
func opOf(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "claim":
		return "claim"
	case len(parts) == 1 && parts[0] == "tasks":
		return "add"
	case len(parts) == 1 && parts[0] == "sessions":
		return "register"
	case len(parts) == 3 && parts[0] == "tasks":
		return parts[2]
	}
	return ""
}

// txStep is the index's hook: a transaction's steps belong to the request
// it was made for. SQLite lets one write transaction be open at a time, so
// the operation of the open one also names the file writes made inside it.
func (fps *failpoints) txStep(ctx context.Context, step string) error {
	op, _ := ctx.Value(opKey{}).(string)
	if op == "" {
		op = "other"
	}
	fps.mu.Lock()
	switch step {
	case index.StepBegun:
		fps.txOp = op
	case index.StepCommitted, index.StepRolledBack:
		fps.txOp = ""
	}
	fps.mu.Unlock()
	return fps.hit(op, step)
}

// fileStep is the task folder's hook. A write outside a transaction (a
// person's add or move) belongs to the request of that kind being served.
func (fps *failpoints) fileStep(step string) error {
	fps.mu.Lock()
	op := fps.txOp
	if op == "" {
		op = "other"
		for _, o := range []string{"add", "promote", "reject", "cancel", "reopen"} {
			if fps.inflight[o] > 0 {
				op = o
				break
			}
		}
	}
	fps.mu.Unlock()
	return fps.hit(op, step)
}

// The steps of snagd's start that failpoints can name.
const (
	stepRebuilding = "rebuilding" // a damaged snag.db was moved aside; the new one is empty
	stepRebuilt    = "rebuilt"
	stepOpened     = "opened" // the index is open; the first rescan is next

	stepVerifyStarted = "started" // op verify: a run was taken by a verifier
	stepVerifyChecked = "checked" // op verify: the verifier answered; the outcome is applied next
)
