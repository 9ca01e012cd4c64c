package client_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/internal/queue"
)

// TestCallsOverHTTP makes every typed call against a real snagd, as a
// person and as an agent's session, and reads the API's types back.
func TestCallsOverHTTP(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	root := newProject(t, t.TempDir())
	serve(t, root, home)
	ctx := context.Background()
	cl, err := client.Dial(ctx, root, client.Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	first, err := cl.Add(ctx, api.AddRequest{Title: "the first", Body: "steps\n", By: "pat", Severity: "high"})
	must(err)
	if first.Status != queue.StatusOpen || first.Trust != queue.TrustVetted || first.Key == "" {
		t.Fatalf("Add = %+v, want an open, vetted task with a key", first)
	}
	second, err := cl.Add(ctx, api.AddRequest{Title: "the second", By: "pat"})
	must(err)

	list, err := cl.List(ctx, api.ListQuery{Limit: 1})
	must(err)
	if len(list.Tasks) != 1 || list.Tasks[0].Key != first.Key || list.Next == "" {
		t.Fatalf("List(limit 1) = %+v, want %s and a cursor", list, first.Key)
	}
	rest, err := cl.List(ctx, api.ListQuery{Limit: 10, Cursor: list.Next, Statuses: []queue.Status{queue.StatusOpen}})
	must(err)
	if len(rest.Tasks) != 1 || rest.Tasks[0].Key != second.Key {
		t.Fatalf("List(cursor) = %+v, want %s", rest, second.Key)
	}

	det, err := cl.Get(ctx, first.Key)
	must(err)
	if det.Row.Key != first.Key || det.Task == nil || det.Body == nil || *det.Body != "steps\n" || det.SHA256 == "" {
		t.Fatalf("Get = %+v, want %s with its data and body", det, first.Key)
	}
	var e *client.Error
	if _, err := cl.Get(ctx, "SNAG-99"); !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Code != api.CodeNotFound {
		t.Fatalf("Get(SNAG-99) = %v, want a 404 not_found *client.Error", err)
	}

	found, err := cl.Search(ctx, api.SearchQuery{Q: "second"})
	must(err)
	if len(found.Hits) != 1 || found.Hits[0].Key != second.Key || found.Hits[0].Snippet == "" {
		t.Fatalf("Search = %+v, want %s with a snippet", found, second.Key)
	}

	s, err := cl.Register(ctx, client.Registration{Name: "ada", Client: "test"})
	must(err)
	agent := cl.As(s.ID, "snag_claim")
	c, err := agent.Claim(ctx, "", api.ClaimRequest{})
	must(err)
	if c.Task == nil || c.Task.Key != first.Key || c.Task.Status != queue.StatusClaimed || c.Epoch == 0 {
		t.Fatalf("Claim(next) = %+v, want %s claimed with an epoch", c, first.Key)
	}
	plan, err := agent.VerifyPlan(ctx, first.Key, api.VerifyRequest{Epoch: c.Epoch})
	must(err)
	if plan.Code != api.VerifyNoCaptureURL {
		t.Fatalf("VerifyPlan = %+v, want %s", plan, api.VerifyNoCaptureURL)
	}
	live, err := cl.Sessions(ctx)
	must(err)
	if len(live.Sessions) != 1 || live.Sessions[0].Name != s.Name || len(live.Leases) != 1 || live.Leases[0].Epoch != c.Epoch {
		t.Fatalf("Sessions = %+v, want %s holding one lease", live, s.Name)
	}
	rel, err := agent.Release(ctx, first.Key, api.LeaseRequest{Epoch: c.Epoch, Reason: "out of scope"})
	must(err)
	if rel.Key != first.Key || rel.Status != queue.StatusOpen {
		t.Fatalf("Release = %+v, want %s open", rel, first.Key)
	}
	if _, err := agent.Release(ctx, first.Key, api.LeaseRequest{Epoch: c.Epoch, Reason: "again"}); !errors.As(err, &e) || e.Code != api.CodeStale {
		t.Fatalf("second Release = %v, want stale", err)
	}
	c, err = agent.Claim(ctx, second.Key, api.ClaimRequest{})
	must(err)
	back, err := cl.TakeBack(ctx, second.Key, api.MoveRequest{By: "pat", Reason: "mine now"})
	must(err)
	if back.Status != queue.StatusOpen {
		t.Fatalf("TakeBack = %+v, want open", back)
	}
	moved, err := cl.Move(ctx, second.Key, "cancel", api.MoveRequest{By: "pat"})
	must(err)
	if moved.Status != queue.StatusCancelled || moved.ID != second.ID {
		t.Fatalf("Move(cancel) = %+v, want %s cancelled", moved, second.ID)
	}
	ended, err := cl.EndSession(ctx, s.ID, api.EndRequest{By: "pat"})
	must(err)
	if !ended.Ended || ended.Name != s.Name {
		t.Fatalf("EndSession = %+v, want %s ended", ended, s.Name)
	}

	log, err := cl.Audit(ctx, api.AuditQuery{Limit: 1000})
	must(err)
	var tools, claims int
	for _, en := range log.Entries {
		switch en.Action {
		case "tool":
			tools++
		case "claim":
			claims++
		}
	}
	if tools == 0 || claims < 2 {
		t.Fatalf("Audit = %+v, want the tool calls and both claims", log)
	}
	more, err := cl.Audit(ctx, api.AuditQuery{After: log.Entries[len(log.Entries)-1].ID})
	must(err)
	if len(more.Entries) != 0 {
		t.Fatalf("Audit(after the last) = %+v, want none", more)
	}
	ri, err := cl.Reindex(ctx, api.MoveRequest{By: "pat"})
	must(err)
	if ri.Files != 2 {
		t.Fatalf("Reindex = %+v, want 2 files", ri)
	}
	rs, err := cl.Rescan(ctx)
	must(err)
	if !rs.Done {
		t.Fatalf("Rescan = %+v", rs)
	}
}
