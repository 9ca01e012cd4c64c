package verifier_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/approval"
	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/snagdtest"
	"github.com/snagdev/snag/internal/workspace"
)

// serve opens a workspace on root as snagd does, a member of the live
// state in the file live, runs it, and waits until it serves claims. stop
// stops it (Workspace.Run ends, Workspace.Close); it is stopped when the
// test ends.
func serve(t *testing.T, root, home, live string) (w *workspace.Workspace, stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	l, err := coord.OpenEmbedded(ctx, live, coord.Options{Host: "test", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if w, err = workspace.Open(ctx, engine.Options{Root: root, Home: home, Coord: l}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v", err)
			}
			w.Close()
			l.Close()
		})
	}
	t.Cleanup(stop)
	if err := w.Engine.WaitServing(ctx); err != nil {
		t.Fatalf("the workspace did not serve: %v", err)
	}
	return w, stop
}

// waitEvent waits for the first event of engine e that is.
func waitEvent(t *testing.T, e *engine.Engine, is func(snag.Event) bool) snag.Event {
	t.Helper()
	deadline := time.After(time.Minute)
	for after := int64(0); ; {
		evs, wait, _ := e.Events().Since(after)
		for _, ev := range evs {
			after = ev.ID
			if is(ev.Data) {
				return ev.Data
			}
		}
		select {
		case <-wait:
		case <-deadline:
			t.Fatal("the event never came")
		}
	}
}

// verifyEvent waits for the first verify event of engine e that is.
func verifyEvent(t *testing.T, e *engine.Engine, is func(snag.VerifyEvent) bool) snag.VerifyEvent {
	t.Helper()
	ev := waitEvent(t, e, func(ev snag.Event) bool { v, ok := ev.(snag.VerifyEvent); return ok && is(v) })
	return ev.(snag.VerifyEvent)
}

// project is the sample project with verify.command set to command in
// its config.json, approved in home.
func project(t *testing.T, command string) (root, home string) {
	t.Helper()
	root, home = snagdtest.Sample(t), t.TempDir()
	config := fmt.Sprintf(`{"version": 1, "verify": {"command": %q}}`, command)
	if err := os.WriteFile(filepath.Join(root, ".snag", "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	scope, err := approval.Scope(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approval.Open(filepath.Join(home, "approved")).Approve(scope, command, false); err != nil {
		t.Fatal(err)
	}
	return root, home
}

// resolve has an agent claim task ref and resolve it; the check starts.
func resolve(t *testing.T, e *engine.Engine, ref queue.Ref) engine.Resolution {
	t.Helper()
	ctx := context.Background()
	s, err := e.Register(ctx, index.Session{Name: "ADA", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Claim(ctx, s, &ref, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Resolve(ctx, engine.VerifyRequest{Ref: ref, Session: &s, Epoch: got.Epoch})
	if err != nil || !res.Started || res.Status != queue.StatusVerifying {
		t.Fatalf("the resolve: %+v %v; want a check started", res, err)
	}
	return res
}

// A holder's resolve goes to the engine, which starts the check on the
// verify service through its hook; the service runs the approved command
// and hands the outcome back to the engine, which resolves the task. The
// service then says where the check stands.
func TestAResolveIsCheckedByTheService(t *testing.T) {
	t.Parallel()
	root, home := project(t, "true")
	w, _ := serve(t, root, home, filepath.Join(t.TempDir(), coord.EmbeddedFile))
	ctx := context.Background()
	ref := queue.Ref{Num: 11} // SNAG-11
	if p, err := w.Verifier.VerifyPlan(ctx, ref, ""); err != nil || p.Code != ops.VerifyOK || p.Verifier != "command" || p.Approved == nil || !*p.Approved {
		t.Fatalf("the dry run: %+v %v; want the approved command", p, err)
	}
	res := resolve(t, w.Engine, ref)
	ev := verifyEvent(t, w.Engine, func(v snag.VerifyEvent) bool { return v.Task == res.Key && v.VerifyOutcome != nil })
	if o := ev.VerifyOutcome; o.Outcome != snag.OutcomePass || !o.Applied || o.Status != queue.StatusResolved {
		t.Fatalf("the outcome: %+v; want pass, applied, resolved", o)
	}
	st, it, err := w.Verifier.Verification(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running || st.Outcome != snag.OutcomePass || it.Status != queue.StatusResolved || len(st.History) != 1 {
		t.Fatalf("where the check stands: %+v (task %s); want passed, one run, resolved", st, it.Status)
	}
}

// A workspace that stops during a check cancels the run and waits for
// it, leaving it open; the next start ends it as interrupted and queues
// it again, once the engine is ready, and the service runs it.
func TestAStopLeavesTheRunForTheNextStart(t *testing.T) {
	t.Parallel()
	root, home := project(t, "sleep 600")
	live := filepath.Join(t.TempDir(), coord.EmbeddedFile)
	w, stop := serve(t, root, home, live)
	ref := queue.Ref{Num: 11} // SNAG-11
	res := resolve(t, w.Engine, ref)
	verifyEvent(t, w.Engine, func(v snag.VerifyEvent) bool { return v.Task == res.Key && v.Started })
	stop() // returns once the command is killed and its run let go

	w, _ = serve(t, root, home, live)
	verifyEvent(t, w.Engine, func(v snag.VerifyEvent) bool { return v.Task == res.Key && v.Started })
	st, it, err := w.Verifier.Verification(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || it.Status != queue.StatusVerifying || len(st.History) != 2 ||
		st.History[1].Outcome != snag.OutcomeInterrupted || !strings.Contains(st.History[1].Reason, "queued again") {
		t.Fatalf("after the restart: %+v (task %s); want the cut-off run interrupted and a new one running", st, it.Status)
	}
}

// A holder whose process is gone when snagd starts again is swept once
// its task's cut-off run is queued again: the sweep then ends the lease
// and leaves the task's check to decide where it goes, instead of giving
// the task back to the queue with its run not yet queued.
func TestAHolderGoneAtARestartIsSweptAfterItsRunIsQueuedAgain(t *testing.T) {
	t.Parallel()
	root, home := project(t, "sleep 600")
	live := filepath.Join(t.TempDir(), coord.EmbeddedFile)
	agent := exec.Command("sleep", "600") // the holder's process
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer agent.Process.Kill()
	w, stop := serve(t, root, home, live)
	ctx := context.Background()
	ref := queue.Ref{Num: 11} // SNAG-11
	s, err := w.Engine.Register(ctx, index.Session{Name: "ADA", Client: "test", PID: agent.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.Engine.Claim(ctx, s, &ref, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Engine.Resolve(ctx, engine.VerifyRequest{Ref: ref, Session: &s, Epoch: got.Epoch})
	if err != nil || !res.Started {
		t.Fatalf("the resolve: %+v %v; want a check started", res, err)
	}
	verifyEvent(t, w.Engine, func(v snag.VerifyEvent) bool { return v.Task == res.Key && v.Started })
	stop()
	agent.Process.Kill()
	agent.Wait()

	w, _ = serve(t, root, home, live)
	waitEvent(t, w.Engine, func(ev snag.Event) bool { e, ok := ev.(snag.SessionEvent); return ok && e.ID == s.ID && e.Ended })
	log, err := w.Engine.AuditLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, a := range log {
		switch {
		case a.Action == "verify" && a.Outcome == "requeued":
			order = append(order, "requeued")
		case a.Action == "release" && a.SessionID == s.ID:
			order = append(order, a.Detail)
		}
	}
	want := []string{"requeued", "holder gone during verify (the outcome decides where the task goes): process gone"}
	if len(order) < 2 || !slices.Equal(order[:2], want) {
		t.Fatalf("at the restart: %q; want the run queued again, then the lease ended with the check left to decide", order)
	}
}
