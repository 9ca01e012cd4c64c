package project

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// NoteTrees are the notes folders the index reads: this worktree's (tree
// "") and those of the other worktrees of its repository that have a
// .snag/ folder, so the notes of every branch checked out are read.
func (p *Project) NoteTrees() []index.NoteTree {
	out := []index.NoteTree{{Tree: "", Dir: filepath.Join(p.Root, Folder, queue.NotesFolder)}}
	common := gitdir.Common(p.Root)
	if common == "" {
		return out
	}
	self, _ := filepath.EvalSymlinks(p.Root)
	for _, top := range gitdir.Worktrees(common) {
		if r := OtherWorktree(self, common, top); r != "" {
			out = append(out, index.NoteTree{Tree: r, Dir: filepath.Join(r, Folder, queue.NotesFolder)})
		}
	}
	return out
}

// OtherWorktree is root, made absolute with its symbolic links resolved,
// when it is a worktree of the repository whose common git folder is
// common, other than self, with a .snag/ folder; else "".
func OtherWorktree(self, common, root string) string {
	if root == "" || !filepath.IsAbs(root) || common == "" {
		return ""
	}
	r, err := filepath.EvalSymlinks(root)
	if err != nil || r == self {
		return ""
	}
	if fi, err := os.Stat(filepath.Join(r, Folder)); err != nil || !fi.IsDir() {
		return ""
	}
	if gitdir.Common(r) != common {
		return ""
	}
	return r
}

// NoteProblems are what is wrong in the notes of every worktree, for snag
// doctor: files that do not parse, keys two notes share, links to notes
// on no branch, and cycles of the link kinds that follow time. The index
// must have read the folders (index.DB.SyncNotes with NoteTrees).
func (p *Project) NoteProblems(ctx context.Context) ([]Finding, error) {
	bad, dups, err := p.DB.NoteProblems(ctx)
	if err != nil {
		return nil, err
	}
	rel := func(n index.NoteRow) string {
		if n.Tree == "" {
			return n.Path
		}
		return filepath.Join(n.Tree, Folder, n.Path)
	}
	var out []Finding
	for _, n := range bad {
		out = append(out, Finding{Path: rel(n), Kind: "invalid", Message: n.Error})
	}
	keys := make([]string, 0, len(dups))
	for k := range dups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return queue.NoteNum(a) - queue.NoteNum(b) })
	for _, k := range keys {
		var files []string
		for _, n := range dups[k] {
			files = append(files, rel(n))
		}
		out = append(out, Finding{Path: files[len(files)-1], Kind: "duplicate", Message: fmt.Sprintf(
			"%s is the key of %d notes (%s): give the newer one the next free key, in its key: line and its file name",
			k, len(files), strings.Join(files, ", "))})
	}
	ns, err := p.DB.Notes(ctx, index.NoteFilter{Limit: 1 << 30})
	if err != nil {
		return nil, err
	}
	ls, err := p.DB.Links(ctx)
	if err != nil {
		return nil, err
	}
	known := map[string]index.NoteRow{}
	for _, n := range ns {
		if n.Key == "" {
			out = append(out, Finding{Path: rel(n), Kind: "invalid", Message: fmt.Sprintf(
				"the note %q has no key, so no link can name it: add a key: line with the next free N-<n> and start its file name with it", n.Title)})
			continue
		}
		known[n.Key] = n
		if n.ID != "" {
			known[n.ID] = n
		}
	}
	for _, l := range ls {
		if _, ok := known[l.To]; !ok {
			out = append(out, Finding{Path: rel(known[l.From]), Kind: "dangling", Message: fmt.Sprintf(
				"%s links (%s) to %s, which is a note on no branch: fix the key, or remove the link", l.From, l.Kind, l.To)})
		}
	}
	for _, kind := range queue.AcyclicKinds {
		for _, c := range noteCycles(ls, kind) {
			out = append(out, Finding{Path: rel(known[c[0]]), Kind: "cycle", Message: fmt.Sprintf(
				"%s links make a cycle, %s: %s follows time, so change one of them to relates", kind, strings.Join(append(c, c[0]), " -> "), kind)})
		}
	}
	return out, nil
}

// noteCycles finds the cycles of kind links, each once, as the keys on it
// from its lowest.
func noteCycles(ls []index.LinkRow, kind string) [][]string {
	next := map[string][]string{}
	for _, l := range ls {
		if l.Kind == kind {
			next[l.From] = append(next[l.From], l.To)
		}
	}
	const (
		white = iota
		grey
		black
	)
	var out [][]string
	seen := map[string]bool{}
	color := map[string]int{}
	var stack []string
	var visit func(string)
	visit = func(k string) {
		color[k] = grey
		stack = append(stack, k)
		for _, n := range next[k] {
			switch color[n] {
			case white:
				visit(n)
			case grey:
				c := slices.Clone(stack[slices.Index(stack, n):])
				low := 0
				for j := range c {
					if queue.NoteNum(c[j]) < queue.NoteNum(c[low]) {
						low = j
					}
				}
				c = append(c[low:], c[:low]...)
				if id := strings.Join(c, " "); !seen[id] {
					seen[id] = true
					out = append(out, c)
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[k] = black
	}
	froms := make([]string, 0, len(next))
	for k := range next {
		froms = append(froms, k)
	}
	slices.Sort(froms)
	for _, k := range froms {
		if color[k] == white {
			visit(k)
		}
	}
	return out
}
