//go:build failpoints

package failpoint

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/snagdev/snag/internal/index"
)

func TestParse(t *testing.T) {
	s, err := parse("claim:renamed@3, add:temp-written=enospc,*:*=sleep:1ms")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.points) != 3 || s.points[0].nth != 3 || s.points[1].action != "enospc" || s.points[2].action != "sleep" {
		t.Fatalf("parsed %+v %+v %+v", s.points[0], s.points[1], s.points[2])
	}
	if err := s.hit("add", "temp-written"); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("add:temp-written: %v; want ENOSPC", err)
	}
	if err := s.hit("add", "temp-written"); err != nil {
		t.Errorf("second hit: %v; a failpoint fires once", err)
	}
	for _, bad := range []string{"claim", "claim:renamed@0", "claim:renamed=explode", ":x", "claim:renamed=sleep:x"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if s, err := parse(""); s != nil || err != nil {
		t.Errorf("empty: %v %v", s, err)
	}
	var none *set
	if err := none.hit("claim", "renamed"); err != nil {
		t.Error(err)
	}
}

// TestArmNamesTheOperation arms from the environment and checks the steps
// of a labelled transaction, and of a file write inside it, count as that
// operation's; a file write outside any transaction counts as the person's
// move being served.
func TestArmNamesTheOperation(t *testing.T) {
	t.Setenv(Env, "claim:renamed=eio,add:temp-written=enospc,other:begun@2=eio")
	if err := Arm(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { armed.Store(nil) })
	if !Armed() {
		t.Fatal("Armed() = false after Arm")
	}

	ctx, done := WithOp(context.Background(), "claim")
	if err := TxStep(ctx, index.StepBegun); err != nil {
		t.Fatal(err)
	}
	if err := FileStep("renamed"); !errors.Is(err, syscall.EIO) {
		t.Errorf("a claim's rename inside its transaction: %v, want EIO", err)
	}
	TxStep(ctx, index.StepRolledBack)
	done()

	if err := FileStep("temp-written"); err != nil {
		t.Errorf("a write with nothing being served: %v, want none (it is other's)", err)
	}
	ctx, done = WithOp(context.Background(), "add")
	if err := FileStep("temp-written"); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("an add's write: %v, want ENOSPC", err)
	}
	done()

	bg := context.Background()
	if err := TxStep(bg, index.StepBegun); err != nil {
		t.Errorf("first unlabelled transaction: %v", err)
	}
	TxStep(bg, index.StepCommitted)
	if err := TxStep(bg, index.StepBegun); !errors.Is(err, syscall.EIO) {
		t.Errorf("second unlabelled transaction: %v, want EIO (other:begun@2)", err)
	}

	t.Setenv(Env, "")
	if err := Arm(); err != nil || Armed() {
		t.Errorf("Arm with %s empty: %v, armed %v; want disarmed", Env, err, Armed())
	}
	t.Setenv(Env, "claim")
	if err := Arm(); err == nil {
		t.Errorf("Arm(%q) succeeded", "claim")
	}
}
