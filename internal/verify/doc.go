// Package verify runs snag's verifiers (DESIGN section 11): the checks a
// task goes through before it counts as resolved.
//
// [RunCommand] runs a verify command in the project root with a timeout:
// exit 0 passes, anything else fails, and the last lines of its output come
// back for a person or an agent to read. Without a shell a command is split
// into words like a POSIX shell would ([Split]), but nothing in it is
// interpreted: a pipe, a redirection, a variable or a glob is refused, with
// an error that says how to turn the shell on. The command runs in a
// process group of its own, which is killed whole when it times out, when
// the context ends, and when the command exits (so nothing it started in
// the background outlives it).
//
// Whether a command may run at all is not this package's business: the
// caller checks the person's approval (package approval) first.
//
// verify runs checks and returns what they found; the daemon decides what
// that means for a task. It must not import cli, daemon, project or index.
package verify
