package snag

import (
	"slices"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/queue"
)

// FileClaim is a session's claim of a repository path, folder or glob.
type FileClaim struct {
	// ID numbers the claim.
	ID int64 `json:"id"`
	// Path is the claimed path, folder or glob, canonical and relative to
	// the repository's top folder.
	Path string `json:"path"`
	// SessionID is the holder's session.
	SessionID int64 `json:"session_id"`
	// Holder is the holder's name.
	Holder string `json:"holder"`
	// TaskID is the task the claim is for, when one was named.
	TaskID string `json:"task_id,omitempty"`
	// Exclusive claims keep every other claim off their paths; shared ones
	// only exclusive claims.
	Exclusive bool `json:"exclusive"`
	// Acquired is when it was first claimed.
	Acquired time.Time `json:"acquired"`
	// Expires is when it ends unless renewed.
	Expires time.Time `json:"expires"`
}

// Message is a handoff to an agent by name, or a report of progress.
type Message struct {
	// ID numbers the message.
	ID int64 `json:"id"`
	// Created is when it was left.
	Created time.Time `json:"created"`
	// Kind is handoff or report.
	Kind string `json:"kind"`
	// From is the agent's or person's name.
	From string `json:"from"`
	// To is a handoff's addressee.
	To string `json:"to,omitempty"`
	// TaskID is the task it is about.
	TaskID string `json:"task_id,omitempty"`
	// Title is a handoff's title.
	Title string `json:"title,omitempty"`
	// Body is a handoff's body, or a report's message.
	Body string `json:"body,omitempty"`
	// Detail is a report's detail.
	Detail string `json:"detail,omitempty"`
	// Seen is when a handoff was shown to its addressee.
	Seen time.Time `json:"seen,omitzero"`
}

// Plan is a plan file (.snag/plans/SLUG.md) as lists show it.
type Plan struct {
	// Slug names the plan: its file's name, and what a task's plan: says.
	Slug string `json:"slug"`
	// Title is the plan's title.
	Title string `json:"title,omitempty"`
	// Status is draft, active, done or archived.
	Status queue.PlanStatus `json:"status,omitempty"`
	// Trust is vetted (a person wrote or activated it) or unvetted.
	Trust queue.Trust `json:"trust,omitempty"`
	// Author is the agent that wrote an unvetted plan.
	Author string `json:"author,omitempty"`
	// Created is when it was written.
	Created time.Time `json:"created,omitzero"`
	// Updated is when snag last changed it.
	Updated time.Time `json:"updated,omitzero"`
	// Tasks counts the plan's tasks by status.
	Tasks map[string]int `json:"tasks,omitempty"`
	// Problem says why the file cannot be read, for one that does not
	// parse.
	Problem string `json:"problem,omitempty"`
}

// Note is a note (.snag/notes/N-<n> - <title>.md): a node of the
// decision graph.
type Note struct {
	// Key is N-<n>.
	Key string `json:"key"`
	// ID is the note's id.
	ID string `json:"id,omitempty"`
	// Title is the note's title.
	Title string `json:"title"`
	// Type is goal, decision, option, action, observation, outcome or
	// question.
	Type string `json:"type"`
	// Branch is the git branch it was written on.
	Branch string `json:"branch,omitempty"`
	// Commit is HEAD when it was written.
	Commit string `json:"commit,omitempty"`
	// Trust is vetted (a person wrote it) or unvetted (an agent did).
	Trust queue.Trust `json:"trust"`
	// Author is the agent that wrote an unvetted note.
	Author string `json:"author,omitempty"`
	// Created is when it was written.
	Created time.Time `json:"created,omitzero"`
	// Tasks are the tasks it is about.
	Tasks []string `json:"tasks,omitempty"`
	// Files are the files it is about.
	Files []string `json:"files,omitempty"`
	// File is the note's file, relative to its worktree's root.
	File string `json:"file"`
	// Worktree is the worktree the file was read from, when it is not
	// snagd's own: a note of another branch, not merged yet.
	Worktree string `json:"worktree,omitempty"`
	// Links are its edges to other notes (in a note's detail and the
	// graph).
	Links []Link `json:"links,omitempty"`
	// Snippet is the text a search matched, words in [brackets].
	Snippet string `json:"snippet,omitempty"`
}

// Link is an edge of the decision graph, written in the note it starts
// from.
type Link struct {
	// From is the key of the note it is written in.
	From string `json:"from,omitempty"`
	// To is the key (or id) of the note it points at.
	To string `json:"to"`
	// Kind is took_from, led_to, chose, rejected, blocks or relates.
	Kind string `json:"kind"`
	// Why says why, in a line.
	Why string `json:"why,omitempty"`
	// Trust is the note's, or unvetted for an agent's link on a person's
	// note.
	Trust queue.Trust `json:"trust,omitempty"`
}

// TaskLease is a live task lease in the activity.
type TaskLease struct {
	// Key is the task's alias.
	Key string `json:"key"`
	// Title is the task's title.
	Title string `json:"title,omitempty"`
	// Holder is the agent that holds it.
	Holder string `json:"holder"`
	// Branch is the holder's branch, when known.
	Branch string `json:"branch,omitempty"`
	// Since is when it was granted.
	Since time.Time `json:"since"`
}

// BranchLease is a live advisory branch write lease.
type BranchLease struct {
	// Branch is the branch.
	Branch string `json:"branch"`
	// Holder is the agent writing on it.
	Holder string `json:"holder"`
	// SecondsLeft is how long it holds without another write.
	SecondsLeft int `json:"seconds_left"`
}

// Worktree is a task's git worktree (snag_claim with worktree).
type Worktree struct {
	// Path is the worktree's folder.
	Path string `json:"path"`
	// Branch is its branch, snag/<key>.
	Branch string `json:"branch"`
	// Key is the task's alias.
	Key string `json:"key"`
	// Status is the task's status, "" when no task has the key.
	Status queue.Status `json:"status,omitempty"`
	// Merged is true when the branch is merged into the base.
	Merged bool `json:"merged"`
	// Clean is true when the worktree has no change and no untracked file.
	Clean bool `json:"clean"`
}

// BranchActivity is what happened lately on one branch.
type BranchActivity struct {
	// Branch is the branch.
	Branch string `json:"branch"`
	// Last is its latest activity.
	Last time.Time `json:"last"`
	// Nodes are keys of the notes written on it, newest first (at most 5).
	Nodes []string `json:"nodes,omitempty"`
	// Claimed are tasks claimed on it (at most 5).
	Claimed []string `json:"claimed,omitempty"`
	// Resolved are tasks resolved on it (at most 5).
	Resolved []string `json:"resolved,omitempty"`
	// Report is its last report.
	Report *ActivityReport `json:"report,omitempty"`
}

// LatestBranches orders branches by their latest activity, newest first
// (then by name), keeps at most limit of them (all when limit is 0), and
// returns how many there were.
func LatestBranches(bs []BranchActivity, limit int) ([]BranchActivity, int) {
	slices.SortFunc(bs, func(x, y BranchActivity) int {
		if c := y.Last.Compare(x.Last); c != 0 {
			return c
		}
		return strings.Compare(x.Branch, y.Branch)
	})
	total := len(bs)
	if limit > 0 && len(bs) > limit {
		bs = bs[:limit]
	}
	return bs, total
}

// ActivityReport is a branch's last report.
type ActivityReport struct {
	// Agent is who reported.
	Agent string `json:"agent"`
	// Message is what it said.
	Message string `json:"message"`
	// At is when.
	At time.Time `json:"at"`
}
