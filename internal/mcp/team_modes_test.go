package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/pgtest"
	"github.com/snagdev/snag/internal/snagdtest"
)

// teamMode maps a test's name to the DSN of the coordination store its
// snagd run with (inTeamMode): startDaemon runs every snagd of that test and
// of its subtests in team mode. It is keyed by name, not a flag, because
// tests run in parallel.
var teamMode sync.Map // test name -> DSN

// inTeamMode makes every snagd t (and its subtests) starts run in team
// mode, on a fresh database of the shared PostgreSQL cluster with the
// coordination schema, until t ends. When t ends it checks that a snagd
// did join the store: a run that never reached it proves nothing.
func inTeamMode(t *testing.T) {
	t.Helper()
	dsn := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := coord.Init(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	name := t.Name()
	teamMode.Store(name, dsn)
	// Cleanups run last first: this one after the test's snagd stopped.
	t.Cleanup(func() {
		teamMode.Delete(name)
		if t.Failed() || t.Skipped() {
			return
		}
		if n := clonesJoined(t, dsn); n == 0 {
			t.Errorf("%s ran in team mode, but no snagd joined the coordination store: startDaemon did not give it $%s", name, coord.Env)
		}
	})
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

// agreesWithStore checks, at the end of a team-mode test whose snagd p
// still runs, that the file claims snagd lists (GET /files) are the live
// ones of the store, holder, path and kind: every claim and every release
// reached the store. A snagd the test stopped is not asked.
func (e *env) agreesWithStore(t *testing.T, p *snagdtest.Process, dsn string) {
	t.Helper()
	select {
	case <-p.Done:
		return
	default:
	}
	if t.Failed() || t.Skipped() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the test's coordination store: %s", strings.ReplaceAll(err.Error(), pgtest.Shared(t).Password, "[redacted]"))
	}
	defer conn.Close(ctx)
	claim := func(holder, path string, exclusive bool) string {
		return fmt.Sprintf("%s %s exclusive=%v", holder, path, exclusive)
	}
	var local, shared map[string]int
	deadline := time.Now().Add(10 * time.Second)
	for {
		local = map[string]int{}
		for _, c := range e.fileClaims(t).Claims {
			local[claim(c.Holder, c.Path, c.Exclusive)]++
		}
		shared = map[string]int{}
		rows, _ := conn.Query(ctx, `SELECT holder, path, exclusive FROM file_claims WHERE released IS NULL AND expires > now()`)
		var holder, path string
		var exclusive bool
		if _, err := pgx.ForEachRow(rows, []any{&holder, &path, &exclusive}, func() error {
			shared[claim(holder, path, exclusive)]++
			return nil
		}); err != nil {
			t.Fatalf("read the store's file claims: %v", err)
		}
		if cmp.Equal(local, shared) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if diff := cmp.Diff(local, shared); diff != "" {
		t.Errorf("at the end of the test, snagd's file claims and the coordination store's live ones differ (-snagd +store):\n%s", diff)
		return
	}
	t.Logf("snagd and the coordination store agree on %d live file claims", len(shared))
}

// teamDSN is the DSN t's snagd runs with in team mode: the one registered
// for t or for the nearest test it is a subtest of; "" when it runs alone.
func teamDSN(t *testing.T) string {
	for name := t.Name(); ; {
		if dsn, ok := teamMode.Load(name); ok {
			return dsn.(string)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return ""
		}
		name = name[:i]
	}
}

// TestLTestsInTeamMode runs the file-claim tests of TESTPLAN (L7, L8, L9)
// again with their snagd in team mode (TESTPLAN T1): file claims made
// across the workspace in the coordination store on PostgreSQL first,
// each run on a database of its own. The bodies and assertions are the
// embedded runs'; only startDaemon's environment differs, and L7's
// storm lasts its -short length.
func TestLTestsInTeamMode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		test func(*testing.T)
	}{
		{"L7", TestL7FileClaimsAllOrNothing},
		{"L8", TestL8FileClaimTTL},
		{"L9", TestL9PathAliases},
	} {
		t.Run(c.name, func(t *testing.T) {
			inTeamMode(t)
			c.test(t)
		})
	}
}
