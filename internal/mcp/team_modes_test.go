package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/snagdev/snag/internal/pgtest"
	"github.com/snagdev/snag/internal/pgtest/teamstore"
	"github.com/snagdev/snag/internal/snagdtest"
)

// inTeamMode makes every snagd t (and its subtests) starts run in team
// mode, on a coordination store of its own (teamstore.Enter).
func inTeamMode(t *testing.T) { t.Helper(); teamstore.Enter(t) }

// teamDSN is the DSN t's snagd runs with in team mode, or "" (startDaemon gives
// it to snagd as $SNAG_COORD).
func teamDSN(t *testing.T) string { return teamstore.DSN(t) }

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
