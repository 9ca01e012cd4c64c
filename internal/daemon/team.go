package daemon

import (
	"context"
	"errors"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/engine/brief"
	"github.com/snagdev/snag/internal/engine/fileclaims"
	"github.com/snagdev/snag/internal/engine/worktrees"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// This file serves team coordination: an agent's context, file claims,
// the commit guard, reports and handoffs. Each handler is a thin reading
// of its request around one engine call.

func wireChecks(cs []fileclaims.Check) []api.FilesCheck {
	out := make([]api.FilesCheck, len(cs))
	for i, c := range cs {
		out[i] = api.FilesCheck{Path: c.Path, Claims: orEmpty(c.Claims)}
	}
	return out
}

// filesClaimed is a claim's answer: a refusal for claims in the way, or
// of a late renewal, is an answer (granted false) that names them.
func filesClaimed(got fileclaims.Claimed, err error) (api.FilesClaimed, error) {
	var refusal *engine.Error
	if err != nil && errors.As(err, &refusal) && (errors.Is(err, engine.ErrFilesHeld) || refusal.Code == "expired") {
		return api.FilesClaimed{Claims: []api.FileClaim{}, Conflicts: orEmpty(got.Conflicts),
			Late: orEmpty(got.Late), Message: refusal.Message}, nil
	}
	if err != nil {
		return api.FilesClaimed{}, err
	}
	msg := "claimed"
	if got.Renewed == len(got.Claims) {
		msg = "renewed"
	}
	return api.FilesClaimed{Granted: true, Claims: orEmpty(got.Claims), Renewed: got.Renewed, Message: msg}, nil
}

// contextOf is session s's context, after it adopts name (when given and
// it may): a name it may not take is said in the answer's NameNote, not
// refused. It returns the session as it now is.
func (d *Daemon) contextOf(ctx context.Context, s index.Session, name string) (api.Context, index.Session, error) {
	note := ""
	if name != "" {
		got, err := d.e.Adopt(ctx, s, name)
		var refusal *engine.Error
		switch {
		case errors.As(err, &refusal) && refusal.Code == "name_kept":
			note = refusal.Message
		case err != nil:
			return api.Context{}, s, err
		default:
			s = got
		}
	}
	tc, err := d.w.Brief.Context(ctx, s)
	if err != nil {
		return api.Context{}, s, err
	}
	return contextWire(tc, note), s, nil
}

// contextWire is an engine context as the API answers it.
func contextWire(tc brief.TeamContext, note string) api.Context {
	out := api.Context{Me: tc.Me.Wire(), NameNote: note, Tasks: heldWire(tc.Tasks), Files: orEmpty(tc.Files),
		Ready: index.WireRows(tc.Ready), ReadyMore: tc.ReadyMore, Others: make([]api.AgentView, len(tc.Others)),
		Handoffs: index.WireMessages(tc.Handoffs), HandoffsMore: tc.HandoffsMore, Reports: index.WireMessages(tc.Reports), Detached: index.WireLeases(tc.Detached),
		Plans: make([]api.Plan, len(tc.Plans))}
	for i, p := range tc.Plans {
		out.Plans[i] = planWire(p)
	}
	out.Decisions = notesWire(tc.Decisions)
	for _, it := range tc.Team {
		out.Team = append(out.Team, api.TeamItem{Source: "team", Kind: it.Kind, Key: it.Key, Type: it.Type, Title: it.Title,
			Branch: it.Branch, From: it.From, Host: it.Host, Created: it.Created})
	}
	for i, o := range tc.Others {
		v := api.AgentView{Name: o.Session.Name, Client: o.Session.Client, Tasks: heldWire(o.Tasks), Files: orEmpty(o.Files)}
		if o.LastReport != nil {
			m := o.LastReport.Wire()
			v.LastReport = &m
		}
		out.Others[i] = v
	}
	return out
}

func heldWire(hs []brief.HeldTask) []api.HeldTask {
	out := make([]api.HeldTask, len(hs))
	for i, h := range hs {
		out[i] = api.HeldTask{Key: h.Key, ID: h.ID, Title: h.Title, Status: h.Status, Trust: h.Trust, Epoch: h.Epoch}
	}
	return out
}

// planWire is a plan as the API answers it.
func planWire(v engine.PlanView) api.Plan {
	out := api.Plan{Slug: v.Slug, Problem: v.Problem}
	if p := v.Plan; p != nil {
		out.Title, out.Status, out.Trust, out.Author, out.Created, out.Updated = p.Title, p.Status, p.Trust, p.Author, p.Created, p.Updated
	}
	if len(v.Tasks) > 0 {
		out.Tasks = map[string]int{}
		for st, n := range v.Tasks {
			out.Tasks[string(st)] = n
		}
	}
	return out
}

func planDetail(v engine.PlanView) api.PlanDetail {
	out := api.PlanDetail{Plan: planWire(v), File: ".snag/" + queue.PlansFolder + "/" + v.Slug + ".md"}
	if v.Plan != nil {
		out.Body = string(v.Plan.Body)
	}
	return out
}

// actorOf is who makes a request: the agent of its session, or the person
// by names (or "person").
func actorOf(s *index.Session, by string) (queue.Actor, string) {
	if s != nil {
		return queue.Agent, s.Name
	}
	if by == "" {
		by = "person"
	}
	return queue.Person, by
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func worktreesWire(vs []worktrees.View) []api.Worktree {
	out := make([]api.Worktree, len(vs))
	for i, v := range vs {
		out[i] = api.Worktree{Path: v.Path, Branch: v.Branch, Key: v.Key, Status: v.Status, Merged: v.Merged, Clean: v.Clean}
	}
	return out
}
