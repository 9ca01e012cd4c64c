package daemon

import (
	"net/http"
	"strings"

	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/internal/project"
)

// FailpointEnv names the environment variable that arms failpoints in a
// snagd built with -tags failpoints, for crash tests; any other snagd
// ignores it. See package internal/failpoint for its values.
const FailpointEnv = failpoint.Env

// StepListening is the start's step after snagd has bound its port and
// written the project's lock, before it answers anything: a failpoint
// that sleeps there is a snagd a loaded machine keeps from answering.
const StepListening = "listening"

// installFailpoints hooks the armed failpoints into the project's task
// folder and index; with none armed it installs nothing.
func installFailpoints(p *project.Project) {
	if !failpoint.Armed() {
		return
	}
	p.Tasks.OnStep(failpoint.FileStep)
	p.DB.OnStep(failpoint.TxStep)
}

// failpointOps labels each request's context with the operation it makes,
// so the steps of its writes can be told apart. With no failpoint armed it
// is h itself.
func failpointOps(h http.Handler) http.Handler {
	if !failpoint.Armed() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, done := failpoint.WithOp(r.Context(), opOf(r))
		defer done()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// opOf names the operation a request makes, or "" for a read.
func opOf(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "claim":
		return "claim"
	case len(parts) == 1 && parts[0] == "tasks":
		return "add"
	case len(parts) == 1 && parts[0] == "sessions":
		return "register"
	case len(parts) == 3 && parts[0] == "tasks":
		return parts[2]
	}
	return ""
}
