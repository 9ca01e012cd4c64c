package api

import (
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// VerifyRequest is ops.VerifyRequest: the body of POST /verify/{ref}, and of
// a holder's POST /tasks/{ref}/resolve (which sends epoch, note and commit).
type VerifyRequest = ops.VerifyRequest

// VerifyPlan is ops.VerifyPlan: the answer of a dry run (POST /verify/{ref}
// with dry_run): what would check the task.
type VerifyPlan = ops.VerifyPlan

// Resolved is ops.Resolved: the answer of a holder's POST
// /tasks/{ref}/resolve and of a person's POST /verify/{ref} without dry_run.
type Resolved = ops.Resolved

// VerifyState is snag.VerifyState: the answer of GET /verify/{ref}: where
// verify of a task stands, with its recent runs, newest first.
type VerifyState = snag.VerifyState

// Visual is snag.Visual: a visual verify's comparison: the anchor's crop as
// captured with the same crop taken again, at the same viewport.
type Visual = snag.Visual

// VerifyRun is snag.VerifyRun: one check of a resolved task: queued when the
// task goes to verifying, started when a verifier takes it, ended with its
// outcome.
type VerifyRun = snag.VerifyRun
