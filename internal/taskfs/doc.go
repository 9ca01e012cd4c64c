// Package taskfs is the file store of a project's .snag folder: every
// task, note, plan and shot snag writes goes through a [Dir], which
// confines every path to one folder with [os.Root], refuses symbolic
// links, creates files without ever overwriting one, writes atomically and
// durably (a temp file, fsync, rename or link, fsync of the folder),
// replaces a file only when it is still what the writer read (compare and
// replace, with an atomic exchange where the kernel has one), keeps a
// person's save that a write displaced aside ([Displaced]), sweeps the
// temp files a crash left, and stamps what it read ([Stamp]) so a reader
// can tell a file changed since.
//
// It knows the domain's names (package queue: what a task file is called,
// how large one may be) and nothing of the index or snagd.
package taskfs
