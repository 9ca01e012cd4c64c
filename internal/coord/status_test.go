package coord

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/pgtest"
)

// TestStatusSeesClonesWithoutJoining: two clones with sessions and a
// lease are seen, each with its agents and what they hold, and reading
// the status writes no row.
func TestStatusSeesClonesWithoutJoining(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	a, b := openClone(t, dsn, "github.com/acme/shop", 1, 0), openClone(t, dsn, "github.com/acme/shop", 2, 0)
	openClone(t, dsn, "github.com/acme/other", 3, 0)
	ada, bo, cy := Session{ID: 1, Name: "ADA"}, Session{ID: 2, Name: "BO"}, Session{ID: 1, Name: "CY"}
	for _, r := range []struct {
		s   *Store
		ses Session
	}{{a, ada}, {a, bo}, {b, cy}} {
		if err := r.s.Register(ctx, r.ses); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Grant(ctx, "T1", "SNAG-1", ada); err != nil {
		t.Fatal(err)
	}
	l, err := b.Grant(ctx, "T2", "SNAG-2", cy)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Resolve(ctx, "T2", l.Epoch, cy.ID, "fixed"); err != nil {
		t.Fatal(err)
	}
	before := rowCounts(t, a)

	st, err := Status(ctx, dsn, "github.com/acme/shop")
	if err != nil {
		t.Fatal(err)
	}
	if st.Workspace != "github.com/acme/shop" || st.Schema != latestVersion() || st.Held != 1 || st.Done != 1 || st.Note != "" {
		t.Errorf("status = %+v, want the workspace at schema %d with 1 held, 1 done and no note", st, latestVersion())
	}
	if len(st.Clones) != 2 {
		t.Fatalf("status lists %d clones, want 2: %+v", len(st.Clones), st.Clones)
	}
	c1, c2 := st.Clones[0], st.Clones[1]
	if c1.Host != "host1" || c1.Root != "/work/clone1" || c1.Branch != "main" || strings.Join(c1.Sessions, ",") != "ADA,BO" || c1.Held != 1 {
		t.Errorf("first clone = %+v, want host1 /work/clone1 on main with ADA,BO holding 1", c1)
	}
	if c2.Host != "host2" || strings.Join(c2.Sessions, ",") != "CY" || c2.Held != 0 {
		t.Errorf("second clone = %+v, want host2 with CY holding 0", c2)
	}
	for _, c := range st.Clones {
		if c.Silent < 0 || c.Silent > 60 || c.Started.IsZero() {
			t.Errorf("clone %s: silent %v s, started %v: want a heartbeat moments ago", c.Host, c.Silent, c.Started)
		}
	}
	if after := rowCounts(t, a); after != before {
		t.Errorf("status wrote rows: counts %v before, %v after", before, after)
	}
	if v, err := Check(ctx, dsn); err != nil || v != latestVersion() {
		t.Errorf("check = %d, %v; want %d", v, err, latestVersion())
	}
}

// rowCounts counts the rows of the tables a join or a status could write.
func rowCounts(t *testing.T, s *Store) [4]int {
	t.Helper()
	var n [4]int
	err := s.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM workspaces), (SELECT count(*) FROM clones),
		(SELECT count(*) FROM sessions), (SELECT count(*) FROM audit)`).Scan(&n[0], &n[1], &n[2], &n[3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStatusUnknownWorkspace: a workspace no clone joined is an empty
// status that says so, and names the workspaces that are there; a
// workspace whose clones all ended says none is connected.
func TestStatusUnknownWorkspace(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	ctx := context.Background()
	st, err := Status(ctx, dsn, "github.com/acme/shop")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Clones) != 0 || st.Clones == nil || !strings.Contains(st.Note, "no clone of github.com/acme/shop has connected yet") || len(st.Others) != 0 {
		t.Errorf("empty database: %+v, want no clones (an empty list), a note and no other workspace", st)
	}
	s := openClone(t, dsn, "gitlab.com/acme/shop", 1, 0)
	if st, err = Status(ctx, dsn, "github.com/acme/shop"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(st.Others, ",") != "gitlab.com/acme/shop" {
		t.Errorf("others = %v, want the workspace a clone joined", st.Others)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE clones SET ended = now()`); err != nil {
		t.Fatal(err)
	}
	if st, err = Status(ctx, dsn, "gitlab.com/acme/shop"); err != nil {
		t.Fatal(err)
	}
	if len(st.Clones) != 0 || !strings.Contains(st.Note, "no clone of gitlab.com/acme/shop is connected") {
		t.Errorf("every clone ended: %+v, want no clones and a note", st)
	}
	if _, err := Status(ctx, dsn, ""); err == nil || !strings.Contains(err.Error(), "workspace") {
		t.Errorf("no workspace name: %v, want an error naming config.json's workspace", err)
	}
}

// TestStatusRefusals: a database without the schema is refused naming
// snag team init; a wrong password's error holds neither password.
func TestStatusRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	empty := pgtest.NewDB(t)
	_, err := Status(ctx, empty, "ws")
	if !errors.Is(err, ErrNotInitialised) || !strings.Contains(err.Error(), "snag team init") {
		t.Errorf("status of an empty database: %v, want ErrNotInitialised naming snag team init", err)
	}
	if _, err := Check(ctx, empty); !errors.Is(err, ErrNotInitialised) {
		t.Errorf("check of an empty database: %v, want ErrNotInitialised", err)
	}

	dsn := newDB(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	right, _ := u.User.Password()
	const wrong = "wr0ng-s3cret-pw"
	u.User = url.UserPassword(u.User.Username(), wrong)
	_, err = Status(ctx, u.String(), "ws")
	if err == nil {
		t.Fatal("status with a wrong password succeeded")
	}
	t.Logf("a wrong password: %v", err)
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), right) {
		t.Errorf("the error holds a password: %v", err)
	}
	if !strings.Contains(err.Error(), "xxxxx") {
		t.Errorf("the error does not name the redacted DSN: %v", err)
	}
}
