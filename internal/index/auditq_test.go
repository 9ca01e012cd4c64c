package index_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// details is the Detail of every audit entry, in the log's order.
func details(t *testing.T, db *index.DB) []string {
	t.Helper()
	es, err := db.AuditLog(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Detail)
	}
	return out
}

func call(detail string) snag.AuditEntry {
	return snag.AuditEntry{SessionID: 1, Actor: queue.Agent, Agent: "a", Action: "tool", Outcome: "ok", Detail: detail}
}

// The entries of tool calls are queued, and every way out of the queue
// keeps them, once each, in the order they were made.
func TestAuditLater(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, db *index.DB, path string) []string
		want []string
	}{
		{"a read of the log writes what is queued first", func(t *testing.T, db *index.DB, _ string) []string {
			db.AuditLater(call("list"))
			db.AuditLater(call("get"))
			return details(t, db)
		}, []string{"list", "get"}},
		{"a later write keeps the order", func(t *testing.T, db *index.DB, _ string) []string {
			db.AuditLater(call("list"))
			if err := db.Audit(ctx, call("claim")); err != nil {
				t.Fatal(err)
			}
			db.AuditLater(call("release"))
			return details(t, db)
		}, []string{"list", "claim", "release"}},
		{"a write that rolls back gives the entries back", func(t *testing.T, db *index.DB, _ string) []string {
			db.AuditLater(call("list"))
			boom := errors.New("boom")
			if err := db.Update(ctx, func(tx *index.Tx) error { return boom }); !errors.Is(err, boom) {
				t.Fatalf("update: %v, want boom", err)
			}
			return details(t, db)
		}, []string{"list"}},
		{"the timer writes them with no other write", func(t *testing.T, db *index.DB, path string) []string {
			db.AuditLater(call("search"))
			// Another connection, which cannot see the queue, sees the
			// entry once the timer has written it.
			other, err := index.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			deadline := time.Now().Add(30 * time.Second)
			for {
				if got := details(t, other); len(got) == 1 || time.Now().After(deadline) {
					return got
				}
				time.Sleep(20 * time.Millisecond)
			}
		}, []string{"search"}},
		{"close writes them", func(t *testing.T, db *index.DB, path string) []string {
			db.AuditLater(call("list"))
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := index.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			return details(t, again)
		}, []string{"list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "snag.db")
			db, err := index.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			got := tc.run(t, db, path)
			if len(got) != len(tc.want) {
				t.Fatalf("audit log %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("audit log %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// Close waits for the write under way before it gives the writer
// connection back, and a write that comes after it is refused, not run on
// a connection the pool has taken back (the audit timer's flush can be
// such a write).
func TestCloseWaitsForTheWrite(t *testing.T) {
	ctx := context.Background()
	db, err := index.Open(ctx, filepath.Join(t.TempDir(), "snag.db"))
	if err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		wrote <- db.Update(ctx, func(tx *index.Tx) error {
			close(inside)
			<-release
			return tx.Audit(call("claim"))
		})
	}()
	<-inside
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("close returned (%v) while a write was under way", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-wrote; err != nil {
		t.Fatalf("the write under way: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := db.Audit(ctx, call("late")); err == nil {
		t.Fatal("a write after close succeeded")
	}
}
