package engine

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
)

// TestS9_AWriteThatFailsInABatchUndoesNoOther: four claims made in one
// batch, where SQLite refuses the rows of the third (a trigger in
// snag.db, a real SQLite error): the batch's transaction is undone and
// its writes made again one at a time, so the other three are granted,
// their files claimed and their rows written, and the third is refused
// with SQLite's error and holds no lease.
func TestS9_AWriteThatFailsInABatchUndoesNoOther(t *testing.T) {
	root := sample(t)
	e := open(t, root)
	ctx := context.Background()
	names := []string{"ALPHA", "BRAVO", "DOOMED", "DELTA"}
	var ss []index.Session
	for _, n := range names {
		s, err := e.Register(ctx, index.Session{Name: n, Client: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	conn, err := sqlite.OpenConn(filepath.Join(root, project.Folder, "snag.db"), sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = sqlitex.ExecuteTransient(conn, `CREATE TRIGGER doomed BEFORE INSERT ON audit
		WHEN NEW.agent = 'DOOMED' AND NEW.action = 'claim' AND NEW.outcome = 'ok'
		BEGIN SELECT RAISE(ABORT, 'doomed claim'); END`, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The writer is taken, as by a batch under way, so that the four
	// claims wait for it together; then the first of them is handed the
	// next batch, as commitWrite does.
	e.batchMu.Lock()
	e.batching = true
	e.batchMu.Unlock()
	got := make([]Claimed, len(ss))
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() { got[i], errs[i] = e.Claim(ctx, s, nil, false) })
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		e.batchMu.Lock()
		n := len(e.waiting)
		if n == len(ss) {
			next := e.waiting[0]
			e.waiting = e.waiting[1:]
			close(next.lead)
		}
		e.batchMu.Unlock()
		if n == len(ss) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d claims reached the batch", n, len(ss))
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()

	for i, s := range ss {
		if s.Name == "DOOMED" {
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "doomed claim") {
				t.Errorf("DOOMED's claim: %+v, %v; want SQLite's error, doomed claim", got[i], errs[i])
			}
			held, err := e.p.DB.LeasesOf(ctx, s.ID)
			if err != nil || len(held) != 0 {
				t.Errorf("DOOMED's leases: %+v, %v; want none", held, err)
			}
			continue
		}
		if errs[i] != nil || got[i].Task == nil {
			t.Errorf("%s's claim: %+v, %v; want a task: the failed claim beside it must not undo it", s.Name, got[i], errs[i])
			continue
		}
		l, err := e.p.DB.LeaseOf(ctx, got[i].Task.ID)
		if err != nil || l.SessionID != s.ID || l.Epoch != got[i].Epoch {
			t.Errorf("%s's lease of %s: %+v, %v; want its own, epoch %d", s.Name, got[i].Task.Key, l, err, got[i].Epoch)
		}
		it, err := e.Get(ctx, queue.Ref{ID: got[i].Task.ID})
		if err != nil || it.Status != queue.StatusClaimed || it.Assignee != s.Name {
			t.Errorf("%s's task row: %+v, %v; want claimed by it", s.Name, it, err)
		}
		raw := readTask(t, e, queue.Ref{ID: got[i].Task.ID})
		if f, err := codec.Parse(raw); err != nil || f.Status != queue.StatusClaimed || f.Assignee != s.Name {
			t.Errorf("%s's task file:\n%s\nwant it claimed by %s", s.Name, raw, s.Name)
		}
	}
	ok := 0
	entries, err := e.p.DB.AuditTail(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range entries {
		if a.Action == "claim" && a.Outcome == "ok" {
			ok++
		}
	}
	if ok != len(ss)-1 {
		t.Errorf("%d claims audited ok; want %d", ok, len(ss)-1)
	}
	var ie *Error
	if i := 2; errors.As(errs[i], &ie) {
		t.Errorf("DOOMED's claim was refused as %s; want SQLite's error, not a refusal", ie.Code)
	}
}
