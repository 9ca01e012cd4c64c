// Package pgtest runs a private PostgreSQL server for tests: a cluster
// made with initdb in a temporary folder, started with pg_ctl on a free
// port of 127.0.0.1, with a password-protected role that the tests connect
// as. Nothing of the machine's own PostgreSQL is used or touched.
//
// PostgreSQL refuses to run as root, and CI runs as root: there the
// cluster's files belong to, and its server runs as, the unprivileged user
// postgres (which Debian's package creates) or else nobody.
//
// The programs are looked for in $SNAG_PG_BIN, then on PATH, then in
// Debian's /usr/lib/postgresql/VERSION/bin. Without them a test skips,
// unless CI is set: then it fails, so that a missing install step in
// .ci/run is caught.
//
// A test package that uses Shared runs its tests through Main, which stops
// the cluster and removes its folder when they end.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Role is the name of the role the tests connect as: a superuser of the
// private cluster, with a password.
const Role = "snag"

// Cluster is a private PostgreSQL server.
type Cluster struct {
	// Port is the port on 127.0.0.1 it listens on.
	Port int
	// Password is the role's password: tests check that it appears in no
	// log and no error.
	Password string

	bin  string // the folder of initdb, pg_ctl and postgres
	dir  string // the temporary folder: data/, the socket, the log
	cred *syscall.Credential

	mu      sync.Mutex
	running bool
	dbs     int
}

// ErrNoPostgres means the PostgreSQL programs were not found.
var ErrNoPostgres = errors.New("pgtest: PostgreSQL's initdb and pg_ctl were not found: install Debian's postgresql package, or set SNAG_PG_BIN to the folder that holds them")

// Bin returns the folder that holds initdb, pg_ctl and postgres.
func Bin() (string, error) {
	has := func(dir string) bool {
		for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("SNAG_PG_BIN"); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("pgtest: SNAG_PG_BIN=%s holds no initdb, pg_ctl and postgres: point it at PostgreSQL's bin folder", d)
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

// version is the major version in a path /usr/lib/postgresql/V/bin.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// Start makes and starts a new cluster. Stop ends it.
func Start(ctx context.Context) (*Cluster, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "snag-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c := &Cluster{bin: bin, dir: dir, Password: randomHex(16)}
	if err := c.setup(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// setup runs initdb, as an unprivileged user when this process is root.
func (c *Cluster) setup(ctx context.Context) error {
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			return err
		}
		c.cred = cred
		if err := os.Chmod(c.dir, 0o755); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		if err := os.Chown(c.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
	}
	pw := filepath.Join(c.dir, "pw")
	if err := os.WriteFile(pw, []byte(c.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if c.cred != nil {
		os.Chown(pw, int(c.cred.Uid), int(c.cred.Gid))
	}
	defer os.Remove(pw)
	// Connections over TCP need the password (scram); the socket, which
	// only this folder's owner can reach, trusts.
	_, err := c.run(ctx, "initdb", "-D", c.data(), "-U", Role, "--pwfile="+pw, "-E", "UTF8", "--locale=C",
		"--auth-host=scram-sha-256", "--auth-local=trust", "--no-sync", "--no-instructions")
	return err
}

// unprivileged is the user the cluster runs as when this process is root.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("pgtest: running as root, and there is no user postgres or nobody to run PostgreSQL as: add one (useradd postgres)")
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// run runs one of the cluster's programs and returns what it printed.
func (c *Cluster) run(ctx context.Context, prog string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgtest: %s %s: %w\n%s", prog, strings.Join(args, " "), err, redact(string(out), c.Password))
	}
	return string(out), nil
}

// Start starts the cluster's server, on the port it had before when it
// was started already (a restart keeps its address).
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return nil
	}
	if c.Port == 0 {
		p, err := freePort()
		if err != nil {
			return err
		}
		c.Port = p
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB",
		c.Port, c.dir)
	_, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-o", opts, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("%w\nits log:\n%s", err, c.Log())
	}
	c.running = true
	return nil
}

// Stop stops the cluster's server, ending every connection (pg_ctl's fast
// mode); Start starts it again on the same port.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return nil
	}
	_, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "-t", "60", "stop")
	if err == nil {
		c.running = false
	}
	return err
}

// Close stops the server and removes the cluster's folder.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.Stop(ctx)
	if err != nil {
		// The server may be stuck: make sure it does not outlive the tests.
		c.run(ctx, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	}
	os.RemoveAll(c.dir)
	return err
}

// Log returns the server's log, with the password redacted.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "log"))
	return redact(string(b), c.Password)
}

// DSN returns the URL that connects to database db of the cluster as
// Role, with its password, over TCP.
func (c *Cluster) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(Role, c.Password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// DSNAt is DSN with another address in place of the server's: the
// address of a proxy in front of it.
func (c *Cluster) DSNAt(addr, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(Role, c.Password),
		Host: addr, Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// CreateDB makes a new empty database and returns its name.
func (c *Cluster) CreateDB(ctx context.Context) (string, error) {
	c.mu.Lock()
	c.dbs++
	name := fmt.Sprintf("t%d_%s", c.dbs, randomHex(4))
	c.mu.Unlock()
	if _, err := c.psql(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return name, nil
}

// psql runs one statement through the socket, as the server's own user.
func (c *Cluster) psql(ctx context.Context, sql string) (string, error) {
	psql := filepath.Join(c.bin, "psql")
	if _, err := os.Stat(psql); err != nil {
		if psql, err = exec.LookPath("psql"); err != nil {
			return "", fmt.Errorf("pgtest: psql was not found beside pg_ctl or on PATH: install Debian's postgresql-client")
		}
	}
	cmd := exec.CommandContext(ctx, psql, "-h", c.dir, "-p", strconv.Itoa(c.Port), "-U", Role, "-d", "postgres",
		"-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql)
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgtest: psql %q: %w: %s", sql, err, out)
	}
	return string(out), nil
}

var (
	shared    *Cluster
	sharedErr error
	sharedMu  sync.Mutex
)

// Shared returns the cluster that the tests of this process share,
// starting it on first use. Without PostgreSQL the test skips, or fails
// when CI is set. The package's TestMain must run its tests through Main.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		shared, sharedErr = Start(ctx)
		cancel()
	}
	if sharedErr != nil {
		if errors.Is(sharedErr, ErrNoPostgres) && os.Getenv("CI") == "" {
			t.Skip(sharedErr)
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set: the PostgreSQL tests must run (.ci/run installs Debian's postgresql): %v", sharedErr)
		}
		t.Fatal(sharedErr)
	}
	return shared
}

// NewDB returns the DSN of a new empty database on the shared cluster.
func NewDB(t testing.TB) string {
	t.Helper()
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c.DSN(name)
}

// Main runs a package's tests (from its TestMain) and then stops the
// shared cluster, when they started one, and removes its folder.
func Main(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Close()
		shared = nil
	}
	return code
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}
