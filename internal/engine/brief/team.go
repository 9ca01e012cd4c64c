package brief

import (
	"context"
	"slices"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// TeamItem is what another clone published that this clone's files do not
// have yet: a decision or an inbox item, by whom, on which branch.
type TeamItem struct {
	Kind, Key, Type, Title, Branch, From, Host string
	Created                                    time.Time
}

// teamContext adds to tc what the other clones have: their agents with
// what they hold and claim, their reports, the handoffs they left for me,
// and the notes and inbox items they added that this clone's files do not
// have yet. With the store out of reach, tc stays this clone's alone.
func (s *Service) teamContext(ctx context.Context, tc *TeamContext, me index.Session) {
	if s.e.TeamLink().CutOff > 0 {
		return
	}
	live := s.e.Coord()
	agents, err := live.Agents(ctx)
	if err != nil {
		return
	}
	byName := map[string]int{}
	for _, a := range agents {
		v := AgentView{Session: index.Session{Name: a.Name + " on " + a.Host, Client: a.Client, Branch: a.Branch, Host: a.Host},
			Files: s.e.TeamClaims(a.Files)}
		for _, l := range a.Leases {
			h := HeldTask{Key: l.Key, ID: l.TaskID, Status: queue.StatusClaimed, Epoch: l.Epoch}
			if it, err := s.db.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
				h.Title, h.Trust = it.Title, it.Trust
			}
			v.Tasks = append(v.Tasks, h)
		}
		byName[a.Name+"@"+a.Host] = len(tc.Others)
		tc.Others = append(tc.Others, v)
	}
	asMessage := func(m coord.Message) index.Message {
		return index.Message{Created: m.Created, Kind: m.Kind, From: m.From + " on " + m.Host, To: m.To, Title: m.Title, Body: m.Body}
	}
	if reports, err := live.Messages(ctx, coord.Report, "", false, 20); err == nil {
		for _, m := range reports {
			if i, ok := byName[m.From+"@"+m.Host]; ok && tc.Others[i].LastReport == nil {
				r := asMessage(m)
				tc.Others[i].LastReport = &r
			}
			tc.Reports = append(tc.Reports, asMessage(m))
		}
		slices.SortStableFunc(tc.Reports, func(a, b index.Message) int { return b.Created.Compare(a.Created) })
		if len(tc.Reports) > contextReports {
			tc.Reports = tc.Reports[:contextReports]
		}
	}
	if hs, err := live.Messages(ctx, coord.Handoff, me.Name, true, contextHandoffsRead); err == nil && len(hs) > 0 {
		var ids []int64
		for i := len(hs) - 1; i >= 0; i-- { // oldest first, as the local ones
			if len(tc.Handoffs) == contextHandoffs { // the rest waits, unseen, for the next read
				tc.HandoffsMore += i + 1
				break
			}
			tc.Handoffs = append(tc.Handoffs, asMessage(hs[i]))
			ids = append(ids, hs[i].ID)
		}
		live.MarkSeen(ctx, ids)
	}
	for _, kind := range []string{coord.Note, coord.Inbox} {
		ms, err := live.Messages(ctx, kind, "", false, 20)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if len(tc.Team) == contextTeam {
				break
			}
			if kind == coord.Note && m.Type != "decision" {
				continue
			}
			if s.teamHas(ctx, kind, m.Key) {
				continue // merged: the files have it
			}
			tc.Team = append(tc.Team, TeamItem{Kind: kind, Key: m.Key, Type: m.Type, Title: m.Title, Branch: m.Branch,
				From: m.From, Host: m.Host, Created: m.Created})
		}
	}
}

// contextTeam is how many of the team's unmerged items a context lists.
const contextTeam = 3

// teamHas reports whether this clone's files have the note or task key.
func (s *Service) teamHas(ctx context.Context, kind, key string) bool {
	if key == "" {
		return false
	}
	if kind == coord.Note {
		_, err := s.db.Note(ctx, key)
		return err == nil
	}
	ref, err := queue.ParseRef(key)
	if err != nil {
		return false
	}
	_, err = s.db.Get(ctx, ref)
	return err == nil
}
