package daemon_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/pgtest"
)

// teamMode maps a test's name to the DSN of the coordination store its
// snagd run with (inTeamMode): spawnEnv runs every snagd of that test and
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
			t.Errorf("%s ran in team mode, but no snagd joined the coordination store: spawnEnv did not give it $%s", name, coord.Env)
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
