package coord

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/pgtest"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://snag:s3cret@db.example.com:5432/snag?sslmode=require", "postgres://snag:xxxxx@db.example.com:5432/snag?sslmode=require"},
		{"postgresql://snag@db/snag", "postgresql://snag@db/snag"},
		{"postgres://db/snag?password=s3cret&sslmode=require", "postgres://db/snag?password=xxxxx&sslmode=require"},
		{"postgres://u:p%40ss@h/d", "postgres://u:xxxxx@h/d"},
		{"host=db user=snag password=s3cret dbname=snag", "host=db user=snag password=xxxxx dbname=snag"},
		{"host=db password = 'se cret' dbname=snag", "host=db password = xxxxx dbname=snag"},
		{"postgres://u:s3cret@h:bad port/d", "postgres://(a DSN that does not parse)"},
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"postgres://snag:s3cret@h/d", "s3cret"},
		{"postgres://u:p%40ss@h/d", "p@ss"},
		{"postgres://h/d?password=q1", "q1"},
		{"host=h password='se cret'", "se cret"},
		{"postgres://u:s3cret@h:bad port/d", "s3cret"},
	} {
		if got := password(c.in); got != c.want {
			t.Errorf("password(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestFindDSN(t *testing.T) {
	home := t.TempDir()
	t.Setenv(Env, "")
	if dsn, _, err := FindDSN("", home); dsn != "" || err != nil {
		t.Fatalf("nothing set: %q %v", dsn, err)
	}
	p, err := SaveDSN(home, "postgres://u:pw@h/d")
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved with mode %v, want 0600", fi.Mode().Perm())
	}
	if dsn, from, err := FindDSN("", home); dsn != "postgres://u:pw@h/d" || from != p || err != nil {
		t.Fatalf("from the file: %q %q %v", dsn, from, err)
	}
	t.Setenv(Env, "postgres://env/d")
	if dsn, from, _ := FindDSN("", home); dsn != "postgres://env/d" || from != "$SNAG_COORD" {
		t.Fatalf("the environment beats the file: %q %q", dsn, from)
	}
	if dsn, from, _ := FindDSN("postgres://flag/d", home); dsn != "postgres://flag/d" || from != "--coord" {
		t.Fatalf("the flag beats all: %q %q", dsn, from)
	}
	t.Setenv(Env, "")
	os.Chmod(p, 0o644)
	if _, _, err := FindDSN("", home); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a readable file: %v, want a refusal naming chmod 600", err)
	}
	os.Remove(p)
	os.Symlink(filepath.Join(home, "elsewhere"), p)
	if _, _, err := FindDSN("", home); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a symlink: %v", err)
	}
}

// TestWrongPasswordNotInError: a failed connection's error names the
// DSN with its password redacted.
func TestWrongPasswordNotInError(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	dsn := strings.Replace(c.DSN("postgres"), c.Password, "Wr0ngPassw0rdXYZ", 1)
	_, err := Init(context.Background(), dsn)
	if err == nil {
		t.Fatal("connected with a wrong password")
	}
	if strings.Contains(err.Error(), "Wr0ngPassw0rdXYZ") {
		t.Fatalf("the error holds the password: %v", err)
	}
	if !strings.Contains(err.Error(), "xxxxx") {
		t.Fatalf("the error does not name the (redacted) DSN: %v", err)
	}
}

// TestBadDSNsNameTheFix: each way a DSN goes wrong is refused with its
// cause and the fix, by snag team init (Init) and snagd's start (Open)
// alike, against a real PostgreSQL: a wrong password, a database that does
// not exist, a port nobody listens on, a host that accepts and never
// answers (within the default connect timeout, not the call's 30 s), and a
// DSN that does not parse.
func TestBadDSNsNameTheFix(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(u *url.URL)) string {
		c := *u
		f(&c)
		return c.String()
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // accepts, and never says a word
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for _, c := range []struct{ name, dsn, want string }{
		{"wrong password", with(func(u *url.URL) { u.User = url.UserPassword(u.User.Username(), "not-the-password") }), "check the user and password"},
		{"no such database", with(func(u *url.URL) { u.Path = "/no_such_db" }), "createdb"},
		{"nobody listens", with(func(u *url.URL) { u.Host = fmt.Sprintf("127.0.0.1:%d", closedPort) }), "pg_isready -h 127.0.0.1 -p " + fmt.Sprint(closedPort)},
		{"silent host", with(func(u *url.URL) { u.Host = silent.Addr().String() }), "nothing answered at 127.0.0.1"},
		{"does not parse", "postgres://snag:pw@[::1", "write it as postgres://USER:PASSWORD@HOST:5432/DATABASE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, ierr := Init(context.Background(), c.dsn)
			_, oerr := Open(context.Background(), c.dsn, Options{Workspace: "w", Host: "h", Root: "/r"})
			for _, err := range []error{ierr, oerr} {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
				}
				if err != nil && strings.Contains(err.Error(), "not-the-password") {
					t.Errorf("%s: the error shows the password: %v", c.name, err)
				}
			}
		})
	}
}
