// Package filesync keeps the index in step with the task files as people
// and programs change them, beside the engine that writes them: it runs
// the watcher (package watch) and hands each batch to the engine; it
// keeps the second looks at files an editor is rewriting (a file that
// reads as missing or broken is believed only once it has had time to
// settle); and it looks again at the saves in place that landed in a file
// snag's own write displaced, until they can be merged back or kept aside.
//
// What a batch, a look or a merge changes is a move the engine makes under
// its write lock; this service says when. It reaches the engine through
// the small seam it declares ([Engine]), and must not import a transport
// (the daemon, HTTP, MCP, the board, the CLI) nor another service.
package filesync

import (
	"context"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/watch"
)

// Engine is what the service needs of the engine (*engine.Engine is one).
type Engine interface {
	// Root is the project root the watcher watches.
	Root() string
	// ApplyBatch applies one batch of the watcher under the write lock.
	ApplyBatch(ctx context.Context, b watch.Batch, polling bool)
	// LookAgain takes a second look that is due at a task file.
	LookAgain(name string)
	// TaskFiles is the folder of task files, for the displaced files.
	TaskFiles() *taskfs.Dir
	// MergeBack merges a displaced save back into its file, or keeps it
	// aside, under the write lock.
	MergeBack(s engine.Save, readd, last bool) engine.MergeOutcome
}

// Service watches the task files of one engine and settles what changes.
// Run serves it; Close ends it. It is safe for concurrent use.
type Service struct {
	e      Engine
	watch  watch.Options
	settle time.Duration

	// ctx ends when the service closes: a displaced file still being
	// looked at is then taken as it is.
	ctx  context.Context
	stop context.CancelFunc

	// settleMu guards settling, the timers of the second looks due, by
	// file name; stopped is set once they were called off for good.
	settleMu sync.Mutex
	settling map[string]*time.Timer
	stopped  bool

	// displacedMu guards displacedOff, set when the service closes, which
	// has new displaced files removed at once; displacedWG counts those
	// being looked at again, which Close waits for.
	displacedMu  sync.Mutex
	displacedOff bool
	displacedWG  sync.WaitGroup
}

// New makes the file sync service of e, with the watcher's and the
// settling's options of opts (Watch, and Settle: engine.DefaultSettle
// when 0). The workspace installs it on e (e.OnSettle, e.OnDisplaced with
// [Service.Displaced]) before Run.
func New(e Engine, opts engine.Options) *Service {
	if opts.Settle <= 0 {
		opts.Settle = engine.DefaultSettle
	}
	s := &Service{e: e, watch: opts.Watch, settle: opts.Settle, settling: map[string]*time.Timer{}}
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s
}

// Run watches the task files and has the engine apply each batch, until
// ctx ends. The first batch is a full rescan, which makes the engine ready.
func (s *Service) Run(ctx context.Context) error {
	w, err := watch.New(s.e.Root(), s.watch)
	if err != nil {
		return err
	}
	return w.Run(ctx, func(b watch.Batch) {
		s.e.ApplyBatch(ctx, b, w.Polling())
	})
}

// Close stops the service: the displaced files still being looked at are
// taken as they are now and merged back or kept aside, and waited for; a
// file displaced from here on is removed at once. The second looks due
// stay until the engine closes (engine.Settler's Stop). Close the service
// before its engine.
func (s *Service) Close() error {
	s.stop()
	s.displacedMu.Lock()
	s.displacedOff = true
	s.displacedMu.Unlock()
	s.displacedWG.Wait()
	return nil
}
