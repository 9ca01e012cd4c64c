// Package coord is the live state that the clones of one repository share
// on PostgreSQL, when a team's agents outgrow one machine: which clones
// (snagd processes) are alive, their agents' sessions, task leases with
// their epochs, the tasks each clone's files say are ready, alias
// numbers, the audit log, and the events that tell every clone of a change.
//
// Task files stay the truth in each clone and travel by git; snagd's index
// stays local SQLite. A lease is granted here first, in one transaction,
// and the clone's file is rewritten after the grant commits.
//
// Liveness follows the session model of Chubby: each clone heartbeats; a
// clone silent for longer than the grace is ended by any other clone, and
// its sessions, leases and claims are released with it. A clone that
// cannot reach the database grants nothing, and after the grace it gives
// its own leases up too, so no two clones ever believe they hold a task.
//
// coord imports nothing of snag's: the engine maps its own types onto it.
package coord

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultGrace is how long a clone may stay silent before its sessions
// end and its leases go back (Options.Grace).
const DefaultGrace = 15 * time.Second

// DefaultHeartbeat is how often a clone heartbeats.
const DefaultHeartbeat = 2 * time.Second

// DefaultTimeout bounds every call that has no deadline of its own.
const DefaultTimeout = 5 * time.Second

var (
	// ErrHeld: the task is held by another session (the error names it).
	ErrHeld = errors.New("task is held by another session")
	// ErrDone: the task was resolved through another clone.
	ErrDone = errors.New("task was resolved")
	// ErrStale: the lease was ended or granted again since its epoch.
	ErrStale = errors.New("stale lease: it was ended or re-granted since")
	// ErrNoneReady: no task this clone has is ready and unheld.
	ErrNoneReady = errors.New("no task is ready")
	// ErrCloneEnded: this clone was silent past the grace and was ended by
	// another; it must join again (Store.Rejoin), and every lease it held
	// is gone.
	ErrCloneEnded = errors.New("this clone was ended after it was silent past the grace: its leases were given up")
	// ErrUnreachable wraps a failure to reach the database: the call may
	// be retried.
	ErrUnreachable = errors.New("coordination store unreachable")
	// ErrNameTaken: a live session of another clone has the name.
	ErrNameTaken = errors.New("name taken on another clone")
	// ErrNotInitialised: the database has no snag schema, or an older one.
	ErrNotInitialised = errors.New("the database has no snag schema")
)

//go:embed schema/*.sql
var schemaFS embed.FS

// Options describe the clone that opens the store.
type Options struct {
	// Workspace is the name the clones of one repository share: the
	// normalised origin URL, or config.json's workspace.
	Workspace string
	// Host, Root and Branch say where the clone is: its machine, its
	// worktree's folder and its branch.
	Host, Root, Branch string
	// Identity tells this clone from another of the same host name and
	// folder (two containers): a random id kept with the repository
	// (CloneIdentity). A live row of the same host and folder is taken
	// over only when its identity is this one, or none (an older snagd's).
	Identity string
	// Version is snagd's.
	Version string
	// Grace is how long a silent clone keeps its leases (DefaultGrace).
	Grace time.Duration
	// Timeout bounds each call without a deadline (DefaultTimeout).
	Timeout time.Duration
	// MaxConns caps the pool (8).
	MaxConns int32
}

// Store is the shared live state as one clone sees it: every call acts as
// that clone, in its workspace.
type Store struct {
	pool *pgxpool.Pool
	// beats is a pool of its own for the heartbeat and the sweep: claims
	// that fill the main pool never delay them past the grace.
	beats  *pgxpool.Pool
	dsn    string // kept for the listener's own connection; never logged
	secret string
	opts   Options
	ws     int64
	clone  atomic.Int64

	branch atomic.Pointer[string] // the clone's branch, as last heartbeaten

	// lastOK is when the database last answered, in Unix nanoseconds.
	lastOK atomic.Int64

	graces []time.Duration // OtherGraces

	pubMu     sync.Mutex
	published map[string]Ready // the ready rows of this clone, as last written
}

// Open connects to the database at dsn, checks that its schema is
// current, and joins the workspace as the clone opts describe. A clone of
// the same host and folder that no other clone has ended is taken over:
// snagd started again keeps its leases.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.Workspace == "" {
		return nil, errors.New("coord: no workspace name: set config.json's workspace, or give the repository an origin remote")
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 8
	}
	s := &Store{dsn: dsn, secret: password(dsn), opts: opts}
	pool, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.pool = pool
	cfg, err := s.config()
	if err != nil {
		pool.Close()
		return nil, err
	}
	cfg.MaxConns, cfg.MinConns = 2, 1
	if s.beats, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		pool.Close()
		return nil, s.wrap("connect", err)
	}
	if err := s.join(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// config parses the DSN into a pool's config with the pool's sizes and
// the session's timeouts set.
func (s *Store) config() (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(s.dsn)
	if err != nil {
		return nil, fmt.Errorf("coord: the DSN %s does not parse: %w: write it as postgres://USER:PASSWORD@HOST:5432/DATABASE", Redact(s.dsn), s.scrub(err))
	}
	cfg.MaxConns = s.opts.MaxConns
	cfg.MinConns = 1
	cfg.MaxConnIdleTime = time.Minute
	cfg.HealthCheckPeriod = 5 * time.Second
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > s.opts.Timeout {
		// The DSN's connect_timeout when it has a shorter one.
		cfg.ConnConfig.ConnectTimeout = min(s.opts.Timeout, DefaultTimeout)
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["application_name"] = "snagd"
	rp["statement_timeout"] = "10000"
	rp["lock_timeout"] = "5000"
	rp["idle_in_transaction_session_timeout"] = "30000"
	return cfg, nil
}

func (s *Store) connect(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := s.config()
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, withFix(s.wrap("connect", err), s.dsn)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, withFix(s.wrap("connect to "+Redact(s.dsn), err), s.dsn)
	}
	v, err := schemaVersion(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, s.wrap("read the schema version", err)
	}
	if want := latestVersion(); v < want {
		pool.Close()
		return nil, fmt.Errorf("coord: %w (version %d, snagd needs %d): run snag team init with the same DSN", ErrNotInitialised, v, want)
	}
	s.ok()
	return pool, nil
}

// join finds or makes the workspace and this clone's row.
func (s *Store) join(ctx context.Context) error {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	return s.tx(ctx, "join", func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO workspaces (name) VALUES ($1)
			ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id`, s.opts.Workspace).Scan(&s.ws)
		if err != nil {
			return err
		}
		var id int64
		// A live row of this host and folder is this clone's, from before
		// a restart: no other clone ended it (its sweep would have), so its
		// leases were never freed, and it takes them over, however long it
		// was away.
		grace := s.opts.Grace.Milliseconds()
		err = tx.QueryRow(ctx, `UPDATE clones SET seen = now(), branch = $4, version = $5, identity = $6, grace_ms = $7
			WHERE id = (SELECT id FROM clones WHERE workspace = $1 AND host = $2 AND root = $3 AND ended IS NULL
				AND identity IN ($6, '') ORDER BY id DESC LIMIT 1)
			RETURNING id`, s.ws, s.opts.Host, s.opts.Root, s.opts.Branch, s.opts.Version, s.opts.Identity, grace).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			err = tx.QueryRow(ctx, `INSERT INTO clones (workspace, host, root, branch, version, identity, grace_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)
				RETURNING id`, s.ws, s.opts.Host, s.opts.Root, s.opts.Branch, s.opts.Version, s.opts.Identity, grace).Scan(&id)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT DISTINCT grace_ms FROM clones WHERE workspace = $1 AND ended IS NULL AND id <> $2
			AND grace_ms > 0 AND grace_ms <> $3 ORDER BY grace_ms`, s.ws, id, grace)
		if err != nil {
			return err
		}
		others, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		s.graces = s.graces[:0]
		for _, ms := range others {
			s.graces = append(s.graces, time.Duration(ms)*time.Millisecond)
		}
		s.clone.Store(id)
		s.pubMu.Lock()
		s.published = nil // a new clone has no ready rows; a taken-over one is rewritten whole
		s.pubMu.Unlock()
		return s.notify(ctx, tx, "clone", map[string]any{"host": s.opts.Host, "root": s.opts.Root, "joined": true})
	})
}

// IdentityFile, in a repository's state folder, holds its clone identity
// (Options.Identity).
const IdentityFile = "clone-id"

// CloneIdentity returns the clone identity kept in the state folder,
// making it (16 random bytes, hex) the first time: every snagd of this
// repository on this machine shares it, and no other machine or container
// has it. It returns "" when the folder cannot be written, and the clone
// is then known by its host and folder alone, as before.
func CloneIdentity(state string) string {
	p := filepath.Join(state, IdentityFile)
	if b, err := os.ReadFile(p); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id
		}
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return ""
	}
	id := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(state, 0o755); err != nil {
		return ""
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if b, err := os.ReadFile(p); err == nil { // another made it meanwhile
			return strings.TrimSpace(string(b))
		}
		return ""
	}
	_, werr := f.WriteString(id + "\n")
	if cerr := f.Close(); werr != nil || cerr != nil {
		os.Remove(p)
		return ""
	}
	return id
}

// Rejoin joins the workspace again after ErrCloneEnded, as a new clone.
func (s *Store) Rejoin(ctx context.Context) error { return s.join(ctx) }

// Close closes the pool. The clone's row stays: a snagd that starts again
// in the same folder takes its row, and its leases, back.
func (s *Store) Close() {
	if s.pool != nil {
		s.pool.Close()
	}
	if s.beats != nil {
		s.beats.Close()
	}
}

// Branch is this clone's branch, as its last heartbeat said.
func (s *Store) Branch() string {
	if b := s.branch.Load(); b != nil {
		return *b
	}
	return s.opts.Branch
}

// Clone is this clone's id.
func (s *Store) Clone() int64 { return s.clone.Load() }

// Across is true: the clones of a team are on several machines.
func (s *Store) Across() bool { return true }

// Workspace is the workspace's name.
func (s *Store) Workspace() string { return s.opts.Workspace }

// Grace is how long a silent clone keeps its leases.
func (s *Store) Grace() time.Duration { return s.opts.Grace }

// OtherGraces lists the graces of the workspace's other live clones that
// differ from this one's, as they were when it joined: each clone is swept
// by its own, so a difference is safe, but a person who set
// --coord-grace on one clone likely meant it for all.
func (s *Store) OtherGraces() []time.Duration { return slices.Clone(s.graces) }

// Unreachable reports how long the database has not answered, or 0 when
// its last call succeeded.
func (s *Store) Unreachable() time.Duration {
	last := s.lastOK.Load()
	if last == 0 {
		return 0
	}
	d := time.Since(time.Unix(0, last))
	if d < s.opts.Timeout && d < DefaultHeartbeat*2 {
		return 0
	}
	return d
}

func (s *Store) ok() { s.lastOK.Store(time.Now().UnixNano()) }

// deadline gives ctx the store's timeout when it has none.
func (s *Store) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// tx runs f in a transaction, retrying once on a serialization failure or
// deadlock, and wraps its error.
func (s *Store) tx(ctx context.Context, what string, f func(pgx.Tx) error) error {
	return s.txOn(ctx, s.pool, what, f)
}

// txOn is tx on pool.
func (s *Store) txOn(ctx context.Context, pool *pgxpool.Pool, what string, f func(pgx.Tx) error) error {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	for attempt := 0; ; attempt++ {
		err := pgx.BeginFunc(ctx, pool, f)
		if err == nil {
			s.ok()
			return nil
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") && attempt < 3 {
			continue
		}
		return s.wrap(what, err)
	}
}

// wrap names what failed and marks a failure to reach the database as
// ErrUnreachable; the DSN's password is scrubbed from it.
func (s *Store) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if isOurs(err) {
		return err
	}
	if unreachable(err) {
		return fmt.Errorf("coord: %s: %w: %w", what, ErrUnreachable, s.scrub(err))
	}
	s.ok() // the database answered, with an error
	return fmt.Errorf("coord: %s: %w", what, s.scrub(err))
}

func (s *Store) scrub(err error) error { return scrub{err: err, secret: s.secret} }

// withFix adds to a failed connection's error the fix its cause calls for:
// the host that does not answer, the password refused, the database or
// role that does not exist, the pg_hba.conf rule missing, TLS.
func withFix(err error, dsn string) error {
	if err == nil {
		return nil
	}
	host, port := "HOST", "5432"
	if cfg, perr := pgx.ParseConfig(dsn); perr == nil {
		host, port = cfg.Host, strconv.Itoa(int(cfg.Port))
	}
	var fix string
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "28P01":
		fix = "the password was refused: check the user and password in the DSN"
	case errors.As(err, &pe) && pe.Code == "3D000":
		fix = "that database does not exist: create it (createdb, as a PostgreSQL superuser) or name another in the DSN"
	case errors.As(err, &pe) && pe.Code == "28000":
		fix = "the server does not let this user in from here: add a rule for it to pg_hba.conf and reload PostgreSQL, or use another user"
	case errors.As(err, &pe) && strings.HasPrefix(pe.Code, "57P03"):
		fix = "the server is starting or shutting down: try again in a moment"
	case strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "SSL"):
		fix = "TLS failed: check sslmode in the DSN (verify-full needs the server's name in its certificate; disable only on a trusted network)"
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout"):
		fix = fmt.Sprintf("nothing answered at %s:%s in time: check the host and port, that PostgreSQL runs there (pg_isready -h %[1]s -p %[2]s), and that no firewall drops the connection", host, port)
	case unreachable(err):
		fix = fmt.Sprintf("%s:%s cannot be reached: check the host and port, and that PostgreSQL runs there (pg_isready -h %[1]s -p %[2]s)", host, port)
	default:
		return err
	}
	return fmt.Errorf("%w: %s", err, fix)
}

// isOurs reports whether err is one of the store's own refusals.
func isOurs(err error) bool {
	for _, e := range []error{ErrHeld, ErrDone, ErrStale, ErrNoneReady, ErrCloneEnded, ErrNotInitialised, ErrNameTaken} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// unreachable reports whether err means the database could not be reached
// or the connection was lost: a call that may succeed when retried.
func unreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 57P01-57P03: admin shutdown, crash shutdown, cannot connect now;
		// 08xxx: connection exceptions.
		return strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08")
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	return pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed") ||
		strings.Contains(err.Error(), "unexpected EOF") || errors.Is(err, os.ErrDeadlineExceeded)
}

// interval is d as a PostgreSQL interval literal.
func interval(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10) + " milliseconds"
}

// Init creates or brings up to date the snag schema in the database at
// dsn, and returns the versions it applied. Several snag team init at
// once apply each migration once.
func Init(ctx context.Context, dsn string) ([]int, error) {
	s := &Store{dsn: dsn, secret: password(dsn), opts: Options{Timeout: 30 * time.Second, MaxConns: 2}}
	cfg, err := s.config()
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, withFix(s.wrap("connect to "+Redact(dsn), err), dsn)
	}
	defer conn.Close(context.Background())
	var applied []int
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// One init at a time: the others wait here, then find the
		// versions applied.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7235001)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS snag_schema (
			version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		have := 0
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM snag_schema`).Scan(&have); err != nil {
			return err
		}
		for _, m := range migrations() {
			if m.version <= have {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO snag_schema (version) VALUES ($1)`, m.version); err != nil {
				return err
			}
			applied = append(applied, m.version)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("create the schema", err)
	}
	return applied, nil
}

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() []migration {
	entries, _ := fs.ReadDir(schemaFS, "schema")
	var ms []migration
	for _, e := range entries {
		n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			continue
		}
		b, _ := schemaFS.ReadFile("schema/" + e.Name())
		ms = append(ms, migration{version: n, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms
}

// Version is the schema version this snag needs, the last migration's:
// what snag team init brings a database to.
func Version() int { return latestVersion() }

func latestVersion() int {
	ms := migrations()
	return ms[len(ms)-1].version
}

// schemaVersion reads the applied schema version, 0 for none.
func schemaVersion(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('snag_schema') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	v := 0
	err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM snag_schema`).Scan(&v)
	return v, err
}
