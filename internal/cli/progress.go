package cli

import (
	"fmt"
	"sync"
	"time"
)

// progressAfter is how long a wait goes unsaid on a terminal; after it,
// the wait says what it waits for, and every progressEvery that it waits
// still. (Variables for the tests.)
var progressAfter, progressEvery = 2 * time.Second, 5 * time.Second

// progressTimer is when a wait next speaks (a variable for the tests,
// which tick it themselves).
var progressTimer = time.After

// saying says, on a terminal and once a wait has lasted progressAfter,
// what the command waits for ("snag: waiting for snagd to rebuild the
// index"), and every progressEvery how long it has waited; piped, it says
// nothing. stop ends it; the caller says the outcome.
func (c *call) saying(what string) (stop func()) {
	if c.opt.json || !isTerminal(c.Stderr) {
		return func() {}
	}
	started := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		wait := progressAfter
		for said := false; ; said = true {
			select {
			case <-done:
				return
			case <-progressTimer(wait):
			}
			if !said {
				fmt.Fprintf(c.Stderr, "snag: %s…\n", what)
			} else {
				fmt.Fprintf(c.Stderr, "snag: still %s: %d s so far\n", what, int(time.Since(started).Seconds()))
			}
			wait = progressEvery
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}
