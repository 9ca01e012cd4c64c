package index

import (
	"context"
	"path"
	"runtime"
	"sync"

	"github.com/snagdev/snag/internal/taskfs"
)

// scanWindow is how far file reading may run ahead of the writer in a bulk
// load: it bounds the parsed tasks held in memory.
const scanWindow = 1024

// reader reads and parses files on every CPU, in the background, and hands
// the results over in order.
type reader struct {
	ctx     context.Context
	cancel  context.CancelFunc
	results []*fileResult
	ready   []chan struct{} // closed when the result of the same index is in
	window  chan struct{}   // with a bound: a token per result read and not yet taken
	done    chan struct{}   // closed when every goroutine has returned
}

func newReader(ctx context.Context, dir *taskfs.Dir, todo []taskfs.Entry, known map[string]rowInfo, bounded bool) *reader {
	ctx, cancel := context.WithCancel(ctx)
	r := &reader{
		ctx:     ctx,
		cancel:  cancel,
		results: make([]*fileResult, len(todo)),
		ready:   make([]chan struct{}, len(todo)),
		done:    make(chan struct{}),
	}
	for i := range r.ready {
		r.ready[i] = make(chan struct{})
	}
	if bounded {
		r.window = make(chan struct{}, scanWindow)
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	wg.Go(func() { // hands out indices in order, at most a window ahead of the writer
		defer close(jobs)
		for i := range todo {
			if r.window != nil {
				select {
				case r.window <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	})
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range jobs {
				e := todo[i]
				old, had := known[path.Join(TasksFolder, e.Name)]
				r.results[i] = readFile(dir, e, old, had)
				close(r.ready[i])
			}
		})
	}
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return r
}

// result waits for the i'th result and takes it.
func (r *reader) result(i int) (*fileResult, error) {
	select {
	case <-r.ready[i]:
	case <-r.ctx.Done():
		return nil, r.ctx.Err()
	}
	res := r.results[i]
	r.results[i] = nil
	if r.window != nil {
		<-r.window
	}
	return res, nil
}

// wait waits until every file is read.
func (r *reader) wait() error {
	select {
	case <-r.done:
		return r.ctx.Err()
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

// stop ends the reading and waits for its goroutines to return.
func (r *reader) stop() {
	r.cancel()
	<-r.done
}
