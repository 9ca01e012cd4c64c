package daemon

import (
	"path/filepath"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/engine/brief"
	"github.com/snagdev/snag/internal/engine/graph"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// noteWire is a note as the API answers it.
func noteWire(n index.NoteRow) api.Note {
	return api.Note{Key: n.Key, ID: n.ID, Title: n.Title, Type: n.Type, Branch: n.Branch, Commit: n.Commit,
		Trust: queue.Trust(n.Trust), Author: n.Author, Created: n.Created, Tasks: n.Tasks, Files: n.Files,
		File: filepath.ToSlash(filepath.Join(".snag", n.Path)), Worktree: n.Tree, Links: linksWire(n.Links), Snippet: n.Snippet}
}

func notesWire(ns []index.NoteRow) []api.Note {
	out := make([]api.Note, len(ns))
	for i, n := range ns {
		out[i] = noteWire(n)
	}
	return out
}

func linksWire(ls []index.LinkRow) []api.Link {
	if len(ls) == 0 {
		return nil
	}
	out := make([]api.Link, len(ls))
	for i, l := range ls {
		out[i] = api.Link{From: l.From, To: l.To, Kind: l.Kind, Why: l.Why, Trust: queue.Trust(l.Trust)}
	}
	return out
}

// nodeWire is a note with its body and its edges both ways.
func nodeWire(n graph.Node) api.NoteDetail {
	return api.NoteDetail{Note: noteWire(n.NoteRow), Body: n.Body, In: linksWire(n.In)}
}

// noteInput is the engine's reading of a note request from session s (nil
// for a person).
func noteInput(s *index.Session, r api.NoteRequest) graph.NoteInput {
	in := graph.NoteInput{Title: r.Title, Body: r.Body, Type: r.Type, Task: r.Task, Files: r.Files,
		Branch: r.Branch, Commit: r.Commit, Tree: r.Worktree}
	if in.Type == "" {
		in.Type = r.Kind
	}
	if s != nil {
		in.Session = s.ID
	}
	for _, l := range r.Links {
		in.Links = append(in.Links, queue.Link{To: l.To, Kind: l.Kind, Why: l.Why})
	}
	if r.TookFrom != "" {
		in.Links = append([]queue.Link{{To: r.TookFrom, Kind: "took_from", Why: r.Why}}, in.Links...)
	}
	return in
}

// linkInput is the engine's reading of a link request.
func linkInput(s *index.Session, r api.LinkRequest) graph.LinkInput {
	in := graph.LinkInput{From: r.From, To: r.To, Kind: r.Kind, Why: r.Why, Branch: r.Branch, Tree: r.Worktree}
	if s != nil {
		in.Session = s.ID
	}
	return in
}

// graphWire is the graph of the notes f picks: the nodes, and the edges
// whose both ends are among them.
func graphWire(ns []index.NoteRow, ls []index.LinkRow) api.Graph {
	out := api.Graph{Nodes: notesWire(ns), Links: []api.Link{}}
	in := map[string]string{}
	for _, n := range ns {
		in[n.Key] = n.Key
		if n.ID != "" {
			in[n.ID] = n.Key
		}
	}
	for _, l := range ls {
		to, ok := in[l.To]
		if _, from := in[l.From]; ok && from {
			out.Links = append(out.Links, api.Link{From: l.From, To: to, Kind: l.Kind, Why: l.Why, Trust: queue.Trust(l.Trust)})
		}
	}
	return out
}

// activityWire is the activity as the API answers it.
func activityWire(a brief.Activity) api.ActivityFeed {
	out := api.ActivityFeed{Workspace: a.Workspace, Tasks: orEmpty(a.Tasks), Files: orEmpty(a.Files),
		Branches: []api.BranchLease{}, Recent: orEmpty(a.Recent), BranchesTotal: a.BranchesTotal}
	for _, b := range a.Branches {
		out.Branches = append(out.Branches, api.BranchLease{Branch: b.Branch, Holder: b.Holder,
			SecondsLeft: int(max(b.Expires.Sub(a.Now).Round(time.Second), time.Second) / time.Second)})
	}
	return out
}
