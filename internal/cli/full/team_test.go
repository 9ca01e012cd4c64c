package full_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/cli"
	"github.com/snagdev/snag/internal/cli/full"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// workspace is the one the test project's config.json names.
const workspace = "github.com/acme/shop"

// project makes a project whose config.json names workspace, with its own
// SNAG_HOME and no $SNAG_COORD, and returns its root.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "shop")
	if err := os.MkdirAll(filepath.Join(root, ".snag"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".snag", "config.json"), []byte(`{"version": 1, "workspace": "`+workspace+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SNAG_HOME", filepath.Join(dir, "home"))
	t.Setenv(coord.Env, "")
	t.Setenv(cli.NoAutostartEnv, "1")
	t.Setenv(cli.SnagdEnv, "/nonexistent/snagd") // the full part is in process: nothing runs snagd
	return root
}

// snag runs the snag command line in root, with the full part, and returns
// its exit code, stdout and stderr.
func snag(t *testing.T, root string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), args, cli.Env{Dir: root, Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Full: full.New()})
	return code, stdout.String(), stderr.String()
}

// secretOf is the password in dsn.
func secretOf(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" {
		t.Fatalf("the test DSN has no password: %s", coord.Redact(dsn))
	}
	return pw
}

func TestTeamInitSavesAndSaysWhatItApplied(t *testing.T) {
	root := project(t)
	dsn := pgtest.NewDB(t)
	pw := secretOf(t, dsn)
	// The DSN is saved in the repository's state folder (.snag/ outside
	// git), so this repository joins and no other project of the user does.
	home := filepath.Join(root, ".snag")
	// A file others can read is replaced, mode 0600, by the DSN given.
	if err := os.WriteFile(filepath.Join(home, "coord"), []byte("postgres://old:0ld-pw@db.example/snag\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errs := snag(t, root, "team", "init", dsn)
	t.Logf("snag team init DSN:\n%s%s", out, errs)
	if code != 0 {
		t.Fatalf("team init: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{fmt.Sprintf("schema at version %d (applied %d): ", coord.Version(), coord.Version()) + coord.Redact(dsn),
		"saved the DSN in " + filepath.Join(home, "coord") + " (mode 0600), in place of postgres://old:xxxxx@db.example/snag"} {
		if !strings.Contains(out, want) {
			t.Errorf("team init's stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "shell's history") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("team init with a password on the command line: stderr should be one line that says so:\n%s", errs)
	}
	fi, err := os.Stat(filepath.Join(home, "coord"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the saved DSN's mode is %04o, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(home, "coord")); strings.TrimSpace(string(b)) != dsn {
		t.Errorf("the saved file holds %q, want the DSN", coord.Redact(string(b)))
	}
	if strings.Contains(out+errs, pw) || strings.Contains(out+errs, "0ld-pw") {
		t.Errorf("team init printed a password:\n%s%s", out, errs)
	}

	// Again, with no DSN: the saved file's, already current, and no hint.
	code, out, errs = snag(t, root, "team", "init")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("already at version %d: ", coord.Version())+coord.Redact(dsn)) || !strings.Contains(out, "came from "+filepath.Join(home, "coord")) || errs != "" {
		t.Errorf("team init again: exit %d\n%s%s\nwant already at version %d, from the saved file, and nothing on stderr", code, out, errs, coord.Version())
	}

	// --no-save leaves the file alone.
	other := pgtest.NewDB(t)
	code, out, errs = snag(t, root, "team", "init", other, "--no-save")
	if code != 0 || !strings.Contains(out, "not saved (--no-save)") || !strings.Contains(errs, "set $SNAG_COORD instead") {
		t.Errorf("team init --no-save: exit %d\n%s%s", code, out, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "coord")); strings.TrimSpace(string(b)) != dsn {
		t.Error("team init --no-save changed the saved DSN")
	}

	// From $SNAG_COORD it is not saved unless --save says so.
	t.Setenv(coord.Env, other)
	if code, out, _ := snag(t, root, "team", "init"); code != 0 || !strings.Contains(out, "the DSN came from $SNAG_COORD") {
		t.Errorf("team init from $SNAG_COORD: exit %d\n%s", code, out)
	}
	code, out, errs = snag(t, root, "team", "init", "--save")
	if code != 0 || !strings.Contains(out, "in place of "+coord.Redact(dsn)) || errs != "" {
		t.Errorf("team init --save from $SNAG_COORD: exit %d\n%s%s", code, out, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "coord")); strings.TrimSpace(string(b)) != other {
		t.Error("team init --save did not save $SNAG_COORD's DSN")
	}
}

// TestR6_TeamScope: snag team init in one repository saves its DSN there:
// a snagd of another project of the same user runs alone, and says so; the
// per-user file of older versions is not read, and both commands say what
// to do with it; snag team leave removes the repository's DSN; a repository
// whose clones share no name (no origin, no workspace in config.json) is
// refused with the fix.
func TestR6_TeamScope(t *testing.T) {
	root := project(t)
	other := filepath.Join(filepath.Dir(root), "other")
	if err := os.MkdirAll(filepath.Join(other, ".snag"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := os.Getenv("SNAG_HOME")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(home, "coord")
	if err := os.WriteFile(legacy, []byte("postgres://old:0ld-pw@db.example/snag\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.NewDB(t)
	code, out, errs := snag(t, root, "team", "init", dsn)
	if code != 0 || !strings.Contains(out, "saved the DSN in "+filepath.Join(root, ".snag", "coord")) {
		t.Fatalf("team init in one repository: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, legacy+" is no longer read") {
		t.Errorf("team init does not name the per-user file it no longer reads:\n%s", errs)
	}
	// The other project stays alone, whatever the per-user file says.
	code, out, errs = snag(t, other, "team", "status")
	if code != 0 || !strings.Contains(out, "snag runs alone here") {
		t.Errorf("team status in another project: exit %d\n%s%s\nwant it alone", code, out, errs)
	}
	if dsnOther, _, err := coord.FindDSN("", filepath.Join(other, ".snag")); dsnOther != "" || err != nil {
		t.Errorf("the other project finds the DSN %q (%v); want none", coord.Redact(dsnOther), err)
	}
	// Leave: the saved DSN is gone, and leaving again says there is none.
	code, out, errs = snag(t, root, "team", "leave")
	if code != 0 || !strings.Contains(out, "left team mode") {
		t.Errorf("team leave: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(root, ".snag", "coord")); err == nil {
		t.Error("team leave left the saved DSN")
	}
	if code, out, _ = snag(t, root, "team", "leave"); code != 0 || !strings.Contains(out, "nothing to leave") {
		t.Errorf("team leave again: exit %d\n%s", code, out)
	}
	// A project whose clones have no name in common is refused, with the fix.
	code, _, errs = snag(t, other, "team", "init", dsn)
	if code == 0 || !strings.Contains(errs, `set "workspace" in .snag/config.json`) {
		t.Errorf("team init with no origin and no workspace: exit %d\n%s", code, errs)
	}
}

func TestTeamStatusShowsTheClones(t *testing.T) {
	root := project(t)
	dsn := pgtest.NewDB(t)
	pw := secretOf(t, dsn)
	ctx := context.Background()
	if _, err := coord.Init(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Setenv(coord.Env, dsn)

	// Before any clone joined, the status says so.
	code, out, errs := snag(t, root, "team", "status")
	if code != 0 || !strings.Contains(out, "no clone of "+workspace+" has connected yet") {
		t.Errorf("team status before any clone: exit %d\n%s%s", code, out, errs)
	}

	var clones []*coord.Store
	for i, where := range []struct{ host, root, branch string }{{"laptop", "/home/dana/shop", "main"}, {"ci-box", "/srv/shop", "snag/SNAG-3"}} {
		s, err := coord.Open(ctx, dsn, coord.Options{Workspace: workspace, Host: where.host, Root: where.root, Branch: where.branch})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		clones = append(clones, s)
		if err := s.Register(ctx, coord.Session{ID: int64(i + 1), Name: []string{"ADA", "BO"}[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := clones[0].Grant(ctx, "T1", "SNAG-1", coord.Session{ID: 1, Name: "ADA"}); err != nil {
		t.Fatal(err)
	}

	code, out, errs = snag(t, root, "team", "status")
	t.Logf("snag team status:\n%s%s", out, errs)
	if code != 0 {
		t.Fatalf("team status: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"team mode: " + coord.Redact(dsn) + fmt.Sprintf(" (from $SNAG_COORD), schema version %d", coord.Version()),
		workspace + ": 2 clones connected, 1 task held, 0 done",
		"laptop /home/dana/shop on main, heartbeat ",
		"agents ADA, holding 1 task",
		"ci-box /srv/shop on snag/SNAG-3, heartbeat ",
		"agents BO, holding 0 tasks",
		"no snagd serves " + root,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("team status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errs, pw) {
		t.Errorf("team status printed the password:\n%s%s", out, errs)
	}

	code, out, _ = snag(t, root, "team", "status", "--json")
	var st cli.TeamStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("team status --json: exit %d, %v\n%s", code, err, out)
	}
	if st.Workspace != workspace || len(st.Clones) != 2 || st.Held != 1 || st.Clones[0].Host != "laptop" ||
		strings.Join(st.Clones[0].Sessions, ",") != "ADA" || st.Clones[0].Held != 1 || strings.Contains(out, pw) {
		t.Errorf("team status --json = %+v", st)
	}
}

func TestTeamStatusAloneAndRefusals(t *testing.T) {
	root := project(t)
	code, out, _ := snag(t, root, "team", "status")
	if code != 0 || !strings.Contains(out, "snag runs alone here") || !strings.Contains(out, "snag team init DSN") {
		t.Errorf("team status with no DSN: exit %d\n%s", code, out)
	}
	code, out, _ = snag(t, root, "team", "status", "--json")
	var st cli.TeamStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Store != "" || st.Workspace != workspace || !strings.Contains(st.Note, "alone") {
		t.Errorf("team status --json with no DSN: exit %d, %v\n%s", code, err, out)
	}

	// A database without the schema: status names snag team init.
	dsn := pgtest.NewDB(t)
	pw := secretOf(t, dsn)
	t.Setenv(coord.Env, dsn)
	code, out, errs := snag(t, root, "team", "status")
	if code != 1 || !strings.Contains(errs, "snag team init") || !strings.Contains(errs, "(the DSN came from $SNAG_COORD)") {
		t.Errorf("team status of an empty database: exit %d\n%s%s", code, out, errs)
	}

	// A wrong password: the error holds neither password.
	u, _ := url.Parse(dsn)
	u.User = url.UserPassword(u.User.Username(), "wr0ng-s3cret")
	t.Setenv(coord.Env, "")
	code, out, errs = snag(t, root, "team", "init", u.String(), "--no-save")
	if code != 1 || !strings.Contains(errs, "password authentication failed") {
		t.Errorf("team init with a wrong password: exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out+errs, "wr0ng-s3cret") || strings.Contains(out+errs, pw) {
		t.Errorf("team init with a wrong password printed a password:\n%s%s", out, errs)
	}

	// Usage mistakes exit 2, and snag team alone prints its usage.
	for _, args := range [][]string{{"team"}, {"team", "frob"}, {"team", "status", "x"}, {"team", "init", "a", "b"}, {"team", "init", "--save", "--no-save"}} {
		if code, _, errs := snag(t, root, args...); code != 2 || errs == "" {
			t.Errorf("snag %s: exit %d, stderr %q; want a usage mistake", strings.Join(args, " "), code, errs)
		}
	}
	if _, _, errs := snag(t, root, "team"); !strings.Contains(errs, "usage: snag team init [DSN]") {
		t.Errorf("snag team: %q, want its usage", errs)
	}
	if code, _, errs := snag(t, root, "team", "init"); code != 2 || !strings.Contains(errs, "team init needs a DSN") {
		t.Errorf("snag team init with no DSN anywhere: exit %d %q", code, errs)
	}
}

// TestTeamDoctorFixTakesTheTeamsKeys: two clones of one workspace, no
// snagd, each with a hand-written task file that has no key. snag doctor
// --fix in each gives it a key from the workspace's sequence, so the two
// never get the same key (each clone's own counter would give both
// SNAG-1); a store out of reach refuses the fix, naming it, rather than
// mint a key another clone may mint too.
func TestTeamDoctorFixTakesTheTeamsKeys(t *testing.T) {
	dsn := pgtest.NewDB(t)
	if _, err := coord.Init(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 2 {
		root := project(t)
		if code, out, errs := snag(t, root, "team", "init", dsn); code != 0 {
			t.Fatalf("team init in clone %d: exit %d\n%s%s", i+1, code, out, errs)
		}
		os.MkdirAll(filepath.Join(root, ".snag", "tasks"), 0o755)
		file := filepath.Join(root, ".snag", "tasks", "no key.md")
		body := fmt.Sprintf("---\nid: tsk_01M9NKEY%018d\ntitle: Written by hand\nstatus: open\n---\nNo key yet.\n", i)
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := snag(t, root, "doctor", "--fix")
		m := regexp.MustCompile(`the key (SNAG-\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("doctor --fix in clone %d gave no key: exit %d\n%s%s", i+1, code, out, errs)
		}
		keys = append(keys, m[1])
	}
	if keys[0] == keys[1] {
		t.Fatalf("both clones' doctor --fix gave %s", keys[0])
	}
	// The store out of reach: the fix is refused, and names why.
	root := project(t)
	if err := os.WriteFile(filepath.Join(root, ".snag", "config.json"), []byte(`{"version": 1, "workspace": "`+workspace+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(coord.Env, "postgres://snag:pw@127.0.0.1:1/snag?connect_timeout=1")
	os.MkdirAll(filepath.Join(root, ".snag", "tasks"), 0o755)
	os.WriteFile(filepath.Join(root, ".snag", "tasks", "no key.md"), []byte("---\nid: tsk_01M9NKEY000000000000000009\ntitle: Written by hand\nstatus: open\n---\n"), 0o644)
	code, out, errs := snag(t, root, "doctor", "--fix")
	if code == 0 || strings.Contains(out, "the key SNAG-") || !strings.Contains(errs, "team's sequence") {
		t.Errorf("doctor --fix with the store out of reach: exit %d\n%s%s\nwant it refused, naming the team's sequence", code, out, errs)
	}
}
