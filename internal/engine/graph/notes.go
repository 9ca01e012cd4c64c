package graph

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/snagdev/snag/internal/atomicfile"
	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// NoteInput is a note to write: a node of the decision graph.
type NoteInput struct {
	Title string
	Body  string
	Type  string // decision by default; one of queue.NoteTypes
	Task  string // a task ref it is about, or ""
	Files []string
	// Links are its edges to notes that exist, each by key or full id
	// (took_from among them: where the idea came from).
	Links []queue.Link
	// Branch and Commit are where it is written: the writer's git branch
	// and HEAD. An agent must say its branch (snag mcp reads it from git);
	// a person's defaults to the worktree's.
	Branch, Commit string
	// Tree is the worktree the note's file goes in: "" for snagd's own,
	// else another worktree of its repository (the agent's).
	Tree string
	// Session is the agent's session, which takes the branch's write lease.
	Session int64
}

// The steps of a note's write that failpoints can name (op note).
const (
	StepNoteWritten = "note-written" // the note's file is in place; it is indexed next
)

// BranchLeaseTTL is how long a graph write holds its branch's advisory
// write lease; the session's next write renews it.
const BranchLeaseTTL = 10 * time.Second

// maxLinks bounds the links one note may have on creation.
const maxLinks = 20

// noteTries is how many keys AddNote tries: each try loses only to a note
// file written with that very key in the same instant.
const noteTries = 20

// AddNote writes a note, N-<n> - <title>.md in the notes folder of the
// writer's worktree, with the next key free in every worktree, its links
// in its frontmatter: an agent's is unvetted, with the agent as its
// author. The file and its edges are indexed together; when that fails
// the file is removed, so a failure leaves neither.
func (s *Service) AddNote(ctx context.Context, actor queue.Actor, who string, in NoteInput) (index.NoteRow, error) {
	entry := snag.AuditEntry{SessionID: in.Session, Actor: actor, Agent: who, Action: "note", Branch: in.Branch}
	refused := func(err *engine.Error) (index.NoteRow, error) {
		entry.Outcome, entry.Detail = "refused", err.Message
		s.e.Audit(ctx, entry)
		return index.NoteRow{}, err
	}
	title := strings.TrimSpace(in.Title)
	if in.Type == "" {
		in.Type = "decision"
	}
	if r := badNote(title, in); r != nil {
		return refused(r)
	}
	tree, dir, r := s.noteTree(in.Tree)
	if r != nil {
		return refused(r)
	}
	if r := s.branchOf(actor, tree, &in.Branch, &in.Commit); r != nil {
		return refused(r)
	}
	entry.Branch = in.Branch
	if err := s.e.SyncNotes(ctx, true); err != nil {
		return index.NoteRow{}, err
	}
	links, r := s.checkLinks(ctx, "", in.Links)
	if r != nil {
		return refused(r)
	}
	now := time.Now().UTC().Truncate(time.Second)
	n := &queue.Note{ID: "note_" + strings.TrimPrefix(queue.NewID(now), queue.IDPrefix), Title: title, Type: in.Type,
		Branch: in.Branch, Commit: in.Commit, Trust: queue.TrustVetted, Created: now, Files: in.Files, Links: links,
		Body: []byte(in.Body)}
	if actor != queue.Person {
		n.Trust, n.Author = queue.TrustUnvetted, who
	}
	if in.Task != "" {
		it, err := s.e.TaskOf(ctx, in.Task)
		if err != nil {
			var r *engine.Error
			if errors.As(err, &r) {
				return refused(r)
			}
			return index.NoteRow{}, err
		}
		n.Tasks, entry.TaskID = []string{it.Key}, it.ID
	}
	if r := s.takeBranch(ctx, in.Session, who, in.Branch); r != nil {
		return refused(r)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return index.NoteRow{}, fmt.Errorf("note: %w: check that %s can be written", err, dir)
	}
	next, err := s.e.NextNoteKey(ctx)
	if err != nil {
		return index.NoteRow{}, err
	}
	path, err := writeNote(dir, n, next)
	if err != nil {
		return index.NoteRow{}, err
	}
	err = failpoint.Hit("note", StepNoteWritten)
	if err == nil {
		err = s.e.SyncNotes(ctx, true)
	}
	if err != nil {
		os.Remove(path) // neither the file nor its edges
		s.e.SyncNotes(ctx, true)
		entry.Outcome, entry.Detail = "failed", err.Error()
		s.e.Audit(ctx, entry)
		return index.NoteRow{}, fmt.Errorf("note: %w: nothing was written; try again", err)
	}
	entry.Outcome, entry.Detail = "ok", fmt.Sprintf("%s %s %q (%s)", n.Key, n.Type, n.Title, n.Trust)
	for _, l := range links {
		entry.Detail += fmt.Sprintf(" %s %s", l.Kind, l.To)
	}
	s.e.Audit(ctx, entry)
	s.publish(snag.NoteEvent{Note: n.Key, Type: n.Type, Branch: new(n.Branch), By: who})
	s.e.TeamPost(coord.Message{Kind: coord.Note, From: who, Key: n.Key, Type: n.Type, Title: n.Title, Body: string(n.Body), Branch: n.Branch})
	return s.db.Note(ctx, n.ID)
}

// badNote refuses a note's title and fields that no note may have: the
// title's length and characters, the type, the body's size, the number of
// files and links, and each file's path.
func badNote(title string, in NoteInput) *engine.Error {
	switch {
	case title == "" || len(title) > 200:
		return refuse(engine.ErrInvalid, "bad_title", "note: a title of 1 to 200 bytes: the decision or finding in a line")
	case strings.ContainsFunc(title, func(r rune) bool { return r < 0x20 || r == 0x7f }) || !utf8.ValidString(title):
		return refuse(engine.ErrInvalid, "bad_title", "note: the title has a control character: keep it on one line")
	case !slices.Contains(queue.NoteTypes, in.Type):
		return refuse(engine.ErrInvalid, "bad_type", "note: unknown type %q (want %s)", in.Type, strings.Join(queue.NoteTypes, ", "))
	case len(in.Body) > 32<<10:
		return refuse(engine.ErrInvalid, "long_body", "note: the body is over 32 KiB: keep a note to one decision")
	case len(in.Files) > 20:
		return refuse(engine.ErrInvalid, "bad_file", "note: over 20 files: name the folder instead")
	case len(in.Links) > maxLinks:
		return refuse(engine.ErrInvalid, "bad_link", "note: over %d links: link the notes that matter", maxLinks)
	}
	for _, f := range in.Files {
		if len(f) > 512 || strings.ContainsAny(f, "\x00\n") {
			return refuse(engine.ErrInvalid, "bad_file", "note: file %q: a repository path on one line", f)
		}
	}
	return nil
}

// writeNote creates note n's file in dir under the first key from next on
// that no other file has, giving up after noteTries keys; it returns the
// file's path.
func writeNote(dir string, n *queue.Note, next int) (string, error) {
	for i := range noteTries {
		n.Key = queue.NoteAlias(next + i)
		data := codec.FormatNote(n)
		if _, err := codec.ParseNote(data); err != nil {
			return "", fmt.Errorf("note: %w", err)
		}
		path := filepath.Join(dir, queue.NoteFileName(n.Key, n.Title))
		err := atomicfile.Create(path, data, 0o644)
		if errors.Is(err, os.ErrExist) || (err == nil && filesWithKey(dir, n.Key) > 1) {
			if err == nil { // another file has the key: give it up, take the next
				os.Remove(path)
			}
			continue
		}
		if err != nil {
			return "", fmt.Errorf("note: %w", err)
		}
		return path, nil
	}
	return "", fmt.Errorf("note: every key tried was taken by a note written meanwhile: try again")
}

// checkLinks checks the links a note from (its key, "" for a new note)
// would have: known kinds, targets that exist (by key or full id, named
// then by key), no link to itself, no cycle of an acyclic kind, at most
// one of each kind to each note.
func (s *Service) checkLinks(ctx context.Context, from string, in []queue.Link) ([]queue.Link, *engine.Error) {
	var out []queue.Link
	for _, l := range in {
		l.To, l.Why = strings.TrimSpace(l.To), strings.TrimSpace(l.Why)
		switch {
		case !slices.Contains(queue.LinkKinds, l.Kind):
			return nil, refuse(engine.ErrInvalid, "bad_link", "link kind %q: want one of %s", l.Kind, strings.Join(queue.LinkKinds, ", "))
		case len(l.Why) > 500 || !utf8.ValidString(l.Why):
			return nil, refuse(engine.ErrInvalid, "bad_link", "link to %s: a why of at most 500 bytes of text", l.To)
		case l.To == "":
			return nil, refuse(engine.ErrInvalid, "bad_link", "a %s link needs to: the note's key (N-3) or full id", l.Kind)
		}
		target, err := s.db.Note(ctx, l.To)
		if errors.Is(err, index.ErrNotFound) && strings.HasPrefix(strings.ToUpper(l.To), "N-") {
			target, err = s.db.Note(ctx, strings.ToUpper(l.To))
		}
		if errors.Is(err, index.ErrNotFound) {
			return nil, refuse(engine.ErrNotFound, "no_source", "no note %s on any branch: give a note's full key (N-3) or id; snag_nodes (snag notes) finds them", l.To)
		}
		if err != nil {
			return nil, &engine.Error{Kind: engine.ErrInvalid, Code: "bad_link", Message: err.Error()}
		}
		l.To = target.Key
		if l.To == from {
			return nil, refuse(engine.ErrInvalid, "bad_link", "%s cannot link to itself", from)
		}
		if slices.ContainsFunc(out, func(o queue.Link) bool { return o.To == l.To && o.Kind == l.Kind }) {
			continue
		}
		if from != "" && slices.Contains(queue.AcyclicKinds, l.Kind) {
			if path := s.pathOf(ctx, l.To, from, l.Kind); path != nil {
				return nil, refuse(engine.ErrInvalid, "cycle", "%s %s %s would close a cycle (%s): %s links follow time; link the other way or use relates",
					from, l.Kind, l.To, strings.Join(append([]string{from}, path...), " -> "), l.Kind)
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// pathOf is a path of kind links from note a to note b (the keys after
// a), or nil.
func (s *Service) pathOf(ctx context.Context, a, b, kind string) []string {
	links, err := s.db.Links(ctx)
	if err != nil {
		return nil
	}
	next := map[string][]string{}
	for _, l := range links {
		if l.Kind == kind {
			next[l.From] = append(next[l.From], l.To)
		}
	}
	prev := map[string]string{a: ""}
	queue := []string{a}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == b {
			var path []string
			for k := b; k != a; k = prev[k] {
				path = append([]string{k}, path...)
			}
			return append([]string{a}, path...)
		}
		for _, n := range next[cur] {
			if _, seen := prev[n]; !seen {
				prev[n] = cur
				queue = append(queue, n)
			}
		}
	}
	return nil
}

// Link adds an edge to the note from: a line in its file's links, in the
// writer's worktree (edges live in the note they start from). A link that
// is there already changes nothing.
func (s *Service) Link(ctx context.Context, actor queue.Actor, who string, in LinkInput) (index.NoteRow, error) {
	entry := snag.AuditEntry{SessionID: in.Session, Actor: actor, Agent: who, Action: "link", Branch: in.Branch}
	refused := func(err *engine.Error) (index.NoteRow, error) {
		entry.Outcome, entry.Detail = "refused", err.Message
		s.e.Audit(ctx, entry)
		return index.NoteRow{}, err
	}
	tree, dir, r := s.noteTree(in.Tree)
	if r != nil {
		return refused(r)
	}
	if r := s.branchOf(actor, tree, &in.Branch, new(string)); r != nil {
		return refused(r)
	}
	entry.Branch = in.Branch
	if err := s.e.SyncNotes(ctx, true); err != nil {
		return index.NoteRow{}, err
	}
	from, err := s.db.Note(ctx, strings.TrimSpace(in.From))
	if errors.Is(err, index.ErrNotFound) {
		from, err = s.db.Note(ctx, strings.ToUpper(strings.TrimSpace(in.From)))
	}
	if errors.Is(err, index.ErrNotFound) {
		return refused(refuse(engine.ErrNotFound, "no_note", "no note %s: snag_nodes (snag notes) lists them", in.From))
	}
	if err != nil {
		return index.NoteRow{}, err
	}
	links, r := s.checkLinks(ctx, from.Key, []queue.Link{{To: in.To, Kind: in.Kind, Why: in.Why}})
	if r != nil {
		return refused(r)
	}
	l := links[0]
	if slices.ContainsFunc(from.Links, func(o index.LinkRow) bool { return o.To == l.To && o.Kind == l.Kind }) {
		return from, nil
	}
	copies, err := s.db.NoteCopies(ctx, from.ID)
	if err != nil {
		return index.NoteRow{}, err
	}
	i := slices.IndexFunc(copies, func(c index.NoteRow) bool { return c.Tree == tree && c.Error == "" })
	if i < 0 {
		return refused(refuse(engine.ErrInvalid, "not_here", "%s is not in your worktree (it was written on %s): edges live in the note they start from, so link from a note of yours (snag_note links) or merge its branch first",
			from.Key, orNone(from.Branch)))
	}
	if actor != queue.Person && from.Trust == string(queue.TrustVetted) {
		l.Trust = queue.TrustUnvetted // an agent's edge on a person's note
	}
	if r := s.takeBranch(ctx, in.Session, who, in.Branch); r != nil {
		return refused(r)
	}
	path := filepath.Join(dir, strings.TrimPrefix(copies[i].Path, queue.NotesFolder+"/"))
	s.rewrite.Lock()
	err = func() error {
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out, err := codec.AddLink(raw, l)
		if err != nil {
			return err
		}
		if err := atomicfile.ReplaceIf(path, raw, out, 0o644); errors.Is(err, atomicfile.ErrChanged) {
			return errors.New("the note changed while the link was added: add it again")
		} else if err != nil {
			return err
		}
		return nil
	}()
	s.rewrite.Unlock()
	if err != nil {
		var pe *codec.ParseError
		if errors.As(err, &pe) {
			return refused(refuse(engine.ErrInvalid, "bad_note", "%s does not read cleanly (%v): snag doctor says how to mend it", from.Key, err))
		}
		return index.NoteRow{}, fmt.Errorf("link %s: %w", from.Key, err)
	}
	if err := s.e.SyncNotes(ctx, true); err != nil {
		return index.NoteRow{}, err
	}
	entry.Outcome, entry.Detail = "ok", fmt.Sprintf("%s %s %s (%s)", from.Key, l.Kind, l.To, orTrust(l.Trust, from.Trust))
	s.e.Audit(ctx, entry)
	s.publish(snag.NoteEvent{Note: from.Key, Link: l.To, LinkKind: l.Kind, By: who})
	return s.db.Note(ctx, from.ID)
}

// LinkInput is an edge to add.
type LinkInput struct {
	From, To, Kind, Why string
	Branch, Tree        string // as NoteInput's
	Session             int64
}

func orTrust(t queue.Trust, note string) string {
	if t != "" {
		return string(t)
	}
	return note
}

// noteTree resolves the worktree a note is written in: "" for snagd's own,
// else another worktree of its repository with a .snag/ folder; and that
// worktree's notes folder.
func (s *Service) noteTree(tree string) (string, string, *engine.Error) {
	if tree == "" || tree == s.root() {
		return "", filepath.Join(s.root(), ".snag", queue.NotesFolder), nil
	}
	r := s.e.SessionRoot(tree)
	if r == "" {
		return "", "", refuse(engine.ErrInvalid, "bad_tree", "%s is not a worktree of the repository snagd serves (%s): run snag from a worktree of it", tree, s.root())
	}
	return r, filepath.Join(r, ".snag", queue.NotesFolder), nil
}

// branchOf checks the branch a graph write names, or for a person's
// fills it (and the commit) from the worktree; an agent's commit is
// filled when its branch is the worktree's.
func (s *Service) branchOf(actor queue.Actor, tree string, branch, commit *string) *engine.Error {
	*branch = strings.TrimSpace(*branch)
	top := tree
	if top == "" {
		top = s.root()
	}
	b, c, ok := gitdir.Head(top)
	switch {
	case *branch == "" && actor == queue.Person:
		if !ok {
			*branch = NoBranch
		} else {
			*branch = b
		}
	case *branch == "":
		return refuse(engine.ErrInvalid, "missing_branch", "branch is missing: pass branch, the git branch you work on (git rev-parse --abbrev-ref HEAD); snag mcp passes it for you")
	case len(*branch) > 200 || strings.ContainsFunc(*branch, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return refuse(engine.ErrInvalid, "bad_branch", "branch %q: a git branch name, with no spaces", *branch)
	}
	if *commit == "" && ok && b == *branch {
		*commit = c
	}
	return nil
}

// NoBranch is the branch of notes written outside a git repository.
const NoBranch = "-"

// takeBranch takes or renews the session's advisory write lease on the
// branch; a person's write, a call with no session, and a write outside
// git (branch -, where there is no branch to share) take none.
func (s *Service) takeBranch(ctx context.Context, session int64, who, branch string) *engine.Error {
	if session == 0 || branch == NoBranch {
		return nil
	}
	// The lease is the workspace's: an agent on another clone writing
	// the same branch's graph holds it too.
	held, ok, r := s.e.TakeBranch(ctx, session, who, branch, BranchLeaseTTL)
	if r != nil || ok {
		return r
	}
	left := max(time.Until(held.Expires).Round(time.Second), time.Second)
	return refuse(engine.ErrHeld, "branch_held", "branch %s is being written by %s for %ds more: wait and write again, or write on a branch of your own (git switch -c); do not name another branch than the one you are on",
		branch, held.Holder, int(left/time.Second))
}

// filesWithKey counts the files in dir whose names start with key.
func filesWithKey(dir, key string) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if k, _, _ := strings.Cut(e.Name(), " "); k == key {
			n++
		}
	}
	return n
}
