//go:build !failpoints

package failpoint

import (
	"context"
	"testing"
)

// TestIgnoredWithoutTheTag is the code make build and go install ship: with
// every step armed to fail, nothing is armed and nothing fails.
func TestIgnoredWithoutTheTag(t *testing.T) {
	t.Setenv(Env, "*:*=eio")
	if err := Arm(); err != nil {
		t.Fatalf("Arm: %v", err)
	}
	if Armed() || Enabled {
		t.Fatalf("built without -tags %s: Armed() %v, Enabled %v", Tag, Armed(), Enabled)
	}
	ctx, done := WithOp(context.Background(), "claim")
	defer done()
	for _, err := range []error{Hit("claim", "renamed"), TxStep(ctx, "begun"), FileStep("temp-written")} {
		if err != nil {
			t.Errorf("a failpoint fired without the tag: %v", err)
		}
	}
}
