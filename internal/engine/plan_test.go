package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
)

// TestWritePlanNeverWaitsForAWrite: a change (a person's move, here) asks
// for plan.json to be rewritten while it holds the write lock. It does not wait for a write of
// plan.json under way (at 10,000 tasks on a loaded machine that took a
// second, which every edit and claim in the meantime waited for), and what
// it changed is in the next write.
func TestWritePlanNeverWaitsForAWrite(t *testing.T) {
	root := sample(t)
	e := open(t, root)
	plan := filepath.Join(root, project.Folder, project.PlanFile)
	before := waitFor(t, "plan.json after the first rescan", func() ([]byte, bool) {
		b, err := os.ReadFile(plan)
		return b, err == nil
	})

	e.planWrite.Lock() // a write of plan.json under way
	var once sync.Once
	done := func() { once.Do(e.planWrite.Unlock) }
	t.Cleanup(done) // before e.Close, which waits for it
	moved := make(chan error, 1)
	go func() {
		_, err := e.PersonMove(context.Background(), queue.Ref{Num: 11}, queue.ActCancel, "dana")
		moved <- err
	}()
	select {
	case err := <-moved:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a person's move waited for the plan.json write under way")
	}
	done()
	waitFor(t, "plan.json with the claim", func() ([]byte, bool) {
		b, _ := os.ReadFile(plan)
		return b, !bytes.Equal(b, before)
	})
}

// waitFor polls f until it reports done, for at most 20 seconds.
func waitFor(t *testing.T, what string, f func() ([]byte, bool)) []byte {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, done := f()
		if done {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 20 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
