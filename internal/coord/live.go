package coord

import (
	"context"
	"time"
)

// Live is the contract of the live state that the snagd of one repository
// share: sessions and their names, task leases with their epochs, the
// liveness of each member (a clone, or a worktree's view), the alias
// sequences, file claims, branch write leases and the audit of live
// actions. It has two implementations: Store, on PostgreSQL, which the
// clones of a team share across machines, and Embedded, a SQLite file in
// the repository's state folder, which every snagd of the repository on
// one machine shares. One conformance suite (live_test.go) holds both to
// it.
//
// Every call acts as the member that opened the store. Its errors are
// the package's: ErrHeld, ErrDone, ErrStale, ErrCloneEnded, ErrNameTaken,
// and ErrUnreachable (retryable) for a store out of reach.
type Live interface {
	// Across reports whether the members are clones on several machines
	// (Store) rather than one machine's worktrees (Embedded): what is
	// shown of the other members names their machines then.
	Across() bool
	// Clone is the member's id; Grace how long it may stay silent;
	// OtherGraces the other live members' graces that differ from it.
	Clone() int64
	Grace() time.Duration
	OtherGraces() []time.Duration
	// Heartbeat marks the member alive (ErrCloneEnded once another swept
	// it); Sweep ends every other member silent past its own grace, with
	// its sessions, leases, claims and branch leases; Rejoin joins again
	// as a new member.
	Heartbeat(ctx context.Context, branch string) error
	Sweep(ctx context.Context) (Swept, error)
	Rejoin(ctx context.Context) error

	// Register records a session (ErrNameTaken when a live session of
	// another member has its name); EndSession ends one and frees what it
	// held.
	Register(ctx context.Context, ses Session) error
	EndSession(ctx context.Context, id int64, why string) ([]Lease, error)
	LiveSessions(ctx context.Context) ([]int64, error)
	LiveNames(ctx context.Context) ([]string, error)

	// Grant, GrantAt, Transfer and Adopt give leases; Check fences a
	// write by its epoch; Release, Resolve, End, Unend, MarkDone and Set
	// end or move them.
	Grant(ctx context.Context, id, key string, ses Session) (Lease, error)
	GrantAt(ctx context.Context, id, key string, ses Session, epoch int64) (Lease, error)
	Transfer(ctx context.Context, id string, epoch int64, ses Session) (Lease, error)
	Adopt(ctx context.Context, id string, epoch int64, ses Session) error
	Check(ctx context.Context, id string, epoch int64, session int64) (Lease, error)
	Release(ctx context.Context, id string, epoch, session int64, why string) error
	Resolve(ctx context.Context, id string, epoch, session int64, why string) error
	End(ctx context.Context, id string, epoch int64, state, why string) error
	Unend(ctx context.Context, id string, epoch int64, ses Session, hold bool) error
	MarkDone(ctx context.Context, id string, epoch int64, why string) (bool, error)
	Set(ctx context.Context, id, key, state, why string) error
	LeaseOf(ctx context.Context, id string) (Lease, error)
	Leases(ctx context.Context) ([]Lease, error)
	Mine(ctx context.Context) ([]Lease, error)
	Finished(ctx context.Context) (map[string]bool, error)

	// Publish makes the member's ready tasks what claim-next picks from;
	// GrantNext grants the first of them no one holds or resolved
	// (ErrNoneReady when none).
	Publish(ctx context.Context, ready []Ready) error
	GrantNext(ctx context.Context, ses Session, skip []string) (Lease, error)

	// NextAlias takes the next number of an alias sequence; GiveBack
	// returns n, taken by NextAlias for an add that was then refused, when
	// no number was taken after it (else it stays a gap).
	NextAlias(ctx context.Context, kind string, floor int64) (int64, error)
	GiveBack(ctx context.Context, kind string, n int64) error

	// ClaimFiles claims paths all or nothing against every other
	// session's live claims; the rest read and end claims.
	ClaimFiles(ctx context.Context, r FilesRequest, overlap func(a, b string) bool) (FilesResult, error)
	FileClaims(ctx context.Context) ([]FileClaim, error)
	ReleaseFiles(ctx context.Context, session int64, paths []string, why string) error
	ForceReleaseFile(ctx context.Context, path, why string) ([]FileClaim, error)
	TakeBranch(ctx context.Context, branch string, ses Session, ttl time.Duration) (held BranchLease, ok bool, err error)

	// Audit and AuditBatch append to the audit of live actions, the one
	// log of the repository (or the team) that outlives any index;
	// AuditLog and AuditTail read it; AuditSent is the id of the last
	// entry of a member's own log (Entry.Log, Entry.Local) it took.
	Audit(ctx context.Context, e Entry) error
	AuditBatch(ctx context.Context, entries []Entry) error
	AuditLog(ctx context.Context, after int64, limit int) ([]Entry, error)
	AuditTail(ctx context.Context, n int) ([]Entry, error)
	AuditSent(ctx context.Context, log string) (int64, error)

	// Post, Messages and MarkSeen carry reports, handoffs, notes and inbox
	// items between members; Agents, Activity and Clones say what the
	// other members' agents hold and did; Listen passes the other
	// members' events until ctx ends.
	Post(ctx context.Context, m Message) error
	Messages(ctx context.Context, kind, to string, unseen bool, limit int) ([]Message, error)
	MarkSeen(ctx context.Context, ids []int64) error
	Agents(ctx context.Context) ([]TeamAgent, error)
	Activity(ctx context.Context, since time.Time) (map[string]*BranchActivity, error)
	Clones(ctx context.Context) ([]Clone, error)
	Branch() string
	Listen(ctx context.Context, f func(Event)) error

	Close()
}

var (
	_ Live = (*Store)(nil)
	_ Live = (*Embedded)(nil)
)
