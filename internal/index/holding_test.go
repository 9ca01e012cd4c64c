package index_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// TestHolding: the ids held are those whose files say claimed or
// verifying; the rows returned whole are the held ones with no live lease.
func TestHolding(t *testing.T) {
	e := newEnv(t)
	leased := task(1, "Claimed with a lease", withStatus(queue.StatusClaimed))
	bare := task(2, "Claimed with no lease", withStatus(queue.StatusClaimed))
	verifying := task(3, "Verifying with no lease", withStatus(queue.StatusVerifying))
	open := task(4, "Open with a lease")
	for _, tk := range []*queue.Task{leased, bare, verifying, open, task(5, "Open")} {
		e.put(tk)
	}
	if _, err := e.db.Scan(e.ctx, e.dir, index.ScanOptions{Hash: true}); err != nil {
		t.Fatal(err)
	}
	s, err := e.db.Register(e.ctx, index.Session{Name: "VESPER"})
	if err != nil {
		t.Fatal(err)
	}
	err = e.db.Update(e.ctx, func(tx *index.Tx) error {
		for _, id := range []string{leased.ID, open.ID} {
			if _, err := tx.Grant(id, s.ID, s.Name, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	held, unleased, err := e.db.Holding(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantHeld := []string{leased.ID, bare.ID, verifying.ID}
	slices.Sort(wantHeld)
	if got := slices.Sorted(maps.Keys(held)); !slices.Equal(got, wantHeld) {
		t.Errorf("held %v; want %v", got, wantHeld)
	}
	var got []string
	for _, r := range unleased {
		got = append(got, r.Key)
		if r.Assignee != "" || r.State != snag.StateOK || r.Title == "" {
			t.Errorf("row %s not whole: %+v", r.Key, r)
		}
	}
	if want := []string{bare.Key, verifying.Key}; !slices.Equal(got, want) {
		t.Errorf("unleased %v; want %v", got, want)
	}
}
