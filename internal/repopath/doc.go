// Package repopath canonicalises the paths and globs agents claim in a
// repository, and decides whether two claims overlap and whether a claim
// covers a file. It is the arithmetic under snag's file claims: Clean turns
// what an agent typed ("./web/", "web//app.ts", a symlink) into one
// canonical form, and Overlap and Match answer exactly, with no false
// positives and no false negatives.
//
// # Claims
//
// A claim is a path relative to the repository root, with / between
// folders, or a glob. A plain path names a file or a folder and covers
// everything beneath it: "web" covers "web/app.ts". A glob matches exactly
// the paths its pattern describes, nothing beneath them:
//
//   - * matches any run of characters within one path element, and ? one
//     character; neither matches /. An element that is only * matches at
//     least one character, since no path has an empty element.
//   - ** as a whole element matches zero or more elements: "a/**/b" matches
//     "a/b" and "a/x/y/b"; "**/*.go" matches "main.go" and "cmd/main.go"; a
//     trailing "/**" covers the folder and everything beneath it, so
//     "web/**" claims what "web" claims. Elsewhere (as in "a**b") ** is two
//     single stars.
//   - [abc], [a-z] and [!abc] (or [^abc]) match one character, never /, in
//     or out of the class. A ] right after [ or [! closes an empty class,
//     which is malformed. There is no escape character: a literal *, ? or [
//     is a class of its own, so the Next.js folder "app/[slug]" is claimed
//     as "app/[[]slug]" (or by claiming "app").
//
// Path elements "." and ".." never occur in a canonical path; a pattern
// that could only match through one (say "a/[.]") is still treated as
// matching that name.
//
// # Case
//
// On a filesystem that folds case (CaseInsensitive reports it), Clean with
// Options.Fold lower-cases claims; Overlap and Match compare runes exactly,
// so a caller that folds claims folds the paths it passes to Match too.
//
// repopath imports only the standard library, no package of snag's.
package repopath
