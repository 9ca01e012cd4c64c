package index_test

import (
	"testing"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/snag"
)

// TestVerifyRunKeepsItsVisualComparison: a run ended with a visual
// comparison reads back with it, figure, verdict and pictures; one ended
// without reads back with none, not a comparison of nothing.
func TestVerifyRunKeepsItsVisualComparison(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		visual *snag.Visual
	}{
		{"changed", &snag.Visual{Before: "shots/a-anchor.png", After: "shots/SNAG-1-verify-1-anchor.png", Diff: "shots/SNAG-1-verify-1-diff.png", Changed: 0.125}},
		{"identical", &snag.Visual{Before: "shots/a-anchor.png", After: "shots/b.png", Diff: "shots/c.png", Changed: 0, Identical: true}},
		{"none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := "tsk_" + tc.name
			var run snag.VerifyRun
			err := e.db.Update(e.ctx, func(tx *index.Tx) error {
				var err error
				if run, err = tx.QueueVerify(snag.VerifyRun{TaskID: task, Verifier: "browser", Command: "http://localhost/"}); err != nil {
					return err
				}
				return tx.EndVerify(run.ID, index.RunEnd{Outcome: "fail", Reason: "looks the same", Shot: "shots/x.png", Visual: tc.visual})
			})
			if err != nil {
				t.Fatal(err)
			}
			runs, err := e.db.VerifyRuns(e.ctx, task, 5)
			if err != nil || len(runs) != 1 {
				t.Fatalf("runs %+v, %v", runs, err)
			}
			got := runs[0]
			switch {
			case got.Outcome != "fail" || got.Shot != "shots/x.png" || got.Ended.IsZero():
				t.Errorf("run %+v", got)
			case tc.visual == nil && got.Visual != nil:
				t.Errorf("visual %+v, want none", got.Visual)
			case tc.visual != nil && (got.Visual == nil || *got.Visual != *tc.visual):
				t.Errorf("visual %+v, want %+v", got.Visual, tc.visual)
			}
		})
	}
}
