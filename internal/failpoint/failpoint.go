// Package failpoint stops snagd at a named step of a write, for the crash
// tests: it kills the process, makes the step fail with EIO or ENOSPC, or
// sleeps. It is compiled in only with the build tag failpoints
// (go build -tags failpoints ./cmd/snagd), as the crash tests build snagd;
// in every other build (make build, go install) its functions do nothing
// and the environment variable is ignored.
//
// The failpoints are the process's: Arm reads them from Env once at start,
// and any package (the daemon, whatever makes the writes) calls Hit, or
// installs FileStep and TxStep as the task folder's and the index's step
// hooks, without holding anything of this package's.
//
// Env's value is a comma-separated list of OP:STEP[@N][=ACTION]:
//
//   - OP is the operation: claim, resolve, release, add, promote, reject,
//     cancel, reopen, register (what a request asked for, named with
//     WithOp), start (snagd starting), verify, other (a write no request
//     asked for: the watcher, the sweep), or * for any.
//   - STEP is a step of a file write (queue's Step constants: temp-created,
//     temp-written, temp-synced, checked, renamed, linked, temp-removed,
//     dir-synced), of a database transaction (index's: begun, committing,
//     committed, rolled-back), of the start (listening, rebuilding, rebuilt, opened),
//     of a verify run (started, checked), or * for any.
//   - N fires on the Nth hit of that failpoint only (default 1).
//   - ACTION is kill (the default: SIGKILL at once, no cleanup), eio or
//     enospc (the step fails with that error, as a real one would), or
//     sleep:DURATION.
//
// Example: SNAG_FAILPOINT=claim:renamed@3 kills snagd right after the
// third claim's rename, before its transaction commits.
//
// failpoint imports nothing of snag's but, built with the tag, index (for
// its step names).
package failpoint

// Env names the environment variable that arms failpoints.
const Env = "SNAG_FAILPOINT"

// Tag is the build tag that compiles failpoints in.
const Tag = "failpoints"
