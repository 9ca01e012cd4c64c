package brief

import (
	"context"
	"fmt"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// TeamBoard is what a person's board shows of the repository's other
// clones in team mode (source: team): their live agents, each with its
// clone's machine, folder and branch, the tasks it holds and its file
// claims, as the coordination store has them. The zero TeamBoard is
// snagd running alone.
type TeamBoard struct {
	// On is set when snagd runs in team mode.
	On bool
	// Unreachable, when set, says why the other clones are not shown: the
	// store is out of reach. Agents is then empty.
	Unreachable string
	// Clones are the other live clones, in the order they joined.
	Clones []coord.Clone
	// Agents are the other clones' live agents, by name.
	Agents []TeamAgent
}

// TeamAgent is a live agent of another clone, with what it holds there.
type TeamAgent struct {
	Name, Client string
	// Clone is its clone's id in the store.
	Clone int64
	// Host, Root and Branch are its clone's machine, folder and branch.
	Host, Root, Branch string
	Tasks              []TeamHeld
	// Files are its live file claims, holder named with its machine.
	Files []snag.FileClaim
}

// TeamHeld is a task an agent of another clone holds.
type TeamHeld struct {
	HeldTask
	// Since is when the store last granted or moved the lease.
	Since time.Time
	// Here is set when this clone's files have the task; when they do
	// not (git has not brought it yet), Title is "".
	Here bool
}

// Holder names the agent with its machine: "LYNX on build-2".
func (a TeamAgent) Holder() string { return a.Name + " on " + a.Host }

// TeamBoard reads the other clones' agents and what they hold for the
// board. Alone it returns the zero TeamBoard at once; with the store out
// of reach it says so in Unreachable rather than failing, since the
// board still shows this clone's own state.
func (s *Service) TeamBoard(ctx context.Context) TeamBoard {
	live := s.e.Coord()
	if !live.Across() {
		return TeamBoard{}
	}
	out := TeamBoard{On: true}
	if d := s.e.TeamLink().CutOff; d > 0 {
		out.Unreachable = fmt.Sprintf("the coordination store has been out of reach for %d s: the other clones' agents are shown again once it is back", int(d.Seconds()))
		return out
	}
	agents, err := live.Agents(ctx)
	if err != nil {
		out.Unreachable = "the other clones' agents could not be read (" + err.Error() + "): reload in a moment"
		return out
	}
	roots := map[int64]string{}
	if clones, err := live.Clones(ctx); err == nil {
		for _, c := range clones {
			if c.ID != live.Clone() {
				out.Clones = append(out.Clones, c)
				roots[c.ID] = c.Root
			}
		}
	}
	for _, a := range agents {
		v := TeamAgent{Name: a.Name, Client: a.Client, Clone: a.Clone, Host: a.Host, Root: roots[a.Clone], Branch: a.Branch, Files: s.e.TeamClaims(a.Files)}
		for _, l := range a.Leases {
			h := TeamHeld{HeldTask: HeldTask{Key: l.Key, ID: l.TaskID, Status: queue.StatusClaimed, Epoch: l.Epoch}, Since: l.Updated}
			if it, err := s.db.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
				h.Title, h.Trust, h.Here = it.Title, it.Trust, true
				if h.Key == "" {
					h.Key = it.Key
				}
			}
			v.Tasks = append(v.Tasks, h)
		}
		out.Agents = append(out.Agents, v)
	}
	return out
}
