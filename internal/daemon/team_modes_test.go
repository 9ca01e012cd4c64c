package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/snagdev/snag/internal/pgtest"
	"github.com/snagdev/snag/internal/pgtest/teamstore"
)

// inTeamMode makes every snagd t (and its subtests) starts run in team
// mode, on a coordination store of its own (teamstore.Enter).
func inTeamMode(t *testing.T) { t.Helper(); teamstore.Enter(t) }

// teamDSN is the DSN t's snagd runs with in team mode, or "" (spawnEnv gives
// it to snagd as $SNAG_COORD).
func teamDSN(t *testing.T) string { return teamstore.DSN(t) }

// agreesWithStore checks, at the end of a team-mode test whose snagd d
// still runs, that the leases d's agents hold (GET /sessions) are the ones
// the store says are held, epoch for epoch: every grant and every end
// reached the store. Detached leases, re-derived from files that say
// claimed (the sample has three), are left out: no agent of this clone
// holds them, and the store is not told of them. So are the leases of
// sessions that have ended: the store frees them all in the session's
// end, while snagd releases them one file at a time after it (the test's
// agents are killed before this check runs). Ends are told to the store
// after their commit, so it waits a little for them. A snagd the test
// stopped, or that never was ready, is not asked.
func (d *daemon) agreesWithStore(dsn string) {
	t := d.t
	t.Helper()
	select {
	case <-d.done:
		return
	default:
	}
	if d.token == "" || t.Failed() || t.Skipped() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the test's coordination store: %s", strings.ReplaceAll(err.Error(), pgtest.Shared(t).Password, "[redacted]"))
	}
	defer conn.Close(ctx)
	var local, shared map[string]int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		local = map[string]int64{}
		var now struct {
			Sessions []struct{ ID int64 }
			Leases   []struct {
				TaskID    string `json:"task_id"`
				SessionID int64  `json:"session_id"`
				Epoch     int64
				Detached  bool
			}
		}
		d.get("/sessions", &now)
		live := map[int64]bool{}
		for _, s := range now.Sessions {
			live[s.ID] = true
		}
		for _, l := range now.Leases {
			if !l.Detached && live[l.SessionID] {
				local[l.TaskID] = l.Epoch
			}
		}
		shared = map[string]int64{}
		rows, _ := conn.Query(ctx, `SELECT task_id, epoch FROM leases WHERE state = 'held'`)
		var id string
		var epoch int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &epoch}, func() error { shared[id] = epoch; return nil }); err != nil {
			t.Fatalf("read the store's leases: %v", err)
		}
		if cmp.Equal(local, shared) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if diff := cmp.Diff(local, shared); diff != "" {
		t.Errorf("at the end of the test, snagd's leases and the coordination store's held ones differ, task id to epoch (-snagd +store):\n%s", diff)
		return
	}
	t.Logf("snagd and the coordination store agree on %d held leases", len(shared))
}

// TestLTestsInTeamMode runs the lease tests of TESTPLAN (L1-L6, L10, L11)
// again with their snagd in team mode (TESTPLAN T1): the live state
// shared through the coordination store on PostgreSQL, each run on a
// database of its own. The bodies and assertions are the embedded runs';
// only spawnEnv's environment differs. The projects are folders without
// git: team mode names the workspace after the folder then.
//
// L2 (every id claimed exactly once as agents drain the queue) is
// TestClaimsAreExactlyOnce here (TestP1ClaimRace in mcp; the store's own
// is coord's TestL2_DrainExactlyOnce). L7-L9 are mcp's, with a team-mode
// run of their own there. engine's TestL3_AnEndedSessionIsRefused has
// none: it checks the engine's cache of live sessions, which team mode
// leaves as it is (sessions stay in snag.db), and L3 here covers the
// rest of L3 in team mode.
func TestLTestsInTeamMode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		test func(*testing.T)
	}{
		{"L1", TestL1_OneWinnerPerRound},
		{"L2", TestClaimsAreExactlyOnce},
		{"L3", TestL3_KilledAgentReleases},
		{"L4", TestL4_StoppedAgentKeepsItsLease},
		{"L5", TestL5_DaemonRestartKeepsLiveLeases},
		{"L6", TestL6_ReusedPIDIsDeadForeignIsNeverSwept},
		{"L10", TestL10_ResolveOnlyThroughVerify},
		{"L11_BrokenOrMissing", TestL11_NoClaimOfABrokenOrMissingTask},
		{"L11_FirstRescan", TestL11_NoClaimBeforeTheFirstRescan},
	} {
		t.Run(c.name, func(t *testing.T) {
			inTeamMode(t)
			c.test(t)
		})
	}
}
