// Package teamstore runs tests in team mode: each such test, and its
// subtests, gets a coordination store of its own on the shared PostgreSQL
// cluster of internal/pgtest, which the snagd it starts join. Only tests
// import it.
package teamstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/pgtest"
)

// stores maps a test's name to the DSN of its coordination store. It is
// keyed by name, not a flag, because tests run in parallel.
var stores sync.Map // test name -> DSN

// Enter makes every snagd t (and its subtests) starts run in team mode, on
// a fresh database of the shared cluster with the coordination schema,
// until t ends; the harness that starts snagd asks DSN for it. When t ends
// it checks that a snagd did join the store: a run that never reached it
// proves nothing.
func Enter(t *testing.T) string {
	t.Helper()
	dsn := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := coord.Init(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	name := t.Name()
	stores.Store(name, dsn)
	// Cleanups run last first: this one after the test's snagd stopped.
	t.Cleanup(func() {
		stores.Delete(name)
		if t.Failed() || t.Skipped() {
			return
		}
		if n := clonesJoined(t, dsn); n == 0 {
			t.Errorf("%s ran in team mode, but no snagd joined the coordination store: the harness that started it did not give it $%s (teamstore.DSN)", name, coord.Env)
		}
	})
	return dsn
}

// DSN is the DSN t's snagd runs with in team mode: the one entered for t
// or for the nearest test it is a subtest of; "" when it runs alone.
func DSN(t *testing.T) string {
	for name := t.Name(); ; {
		if dsn, ok := stores.Load(name); ok {
			return dsn.(string)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return ""
		}
		name = name[:i]
	}
}

// clonesJoined counts the clones that ever joined the store at dsn.
func clonesJoined(t *testing.T, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the test's coordination store: %s", strings.ReplaceAll(err.Error(), pgtest.Shared(t).Password, "[redacted]"))
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM clones`).Scan(&n); err != nil {
		t.Fatalf("count the clones: %v", err)
	}
	return n
}
