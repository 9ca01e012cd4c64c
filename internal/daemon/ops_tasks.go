package daemon

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// taskOps are the operations on tasks: list, get, add, search, claim,
// release, resolve, verify and a person's moves.
func (d *Daemon) taskOps(hs ops.Handlers) {
	ops.Handle(hs, ops.ListTasks, d.listTasks)
	ops.Handle(hs, ops.GetTask, d.getTask)
}

// taskRef reads a request's task reference.
func taskRef(s string) (queue.Ref, error) {
	ref, err := queue.ParseRef(s)
	if err != nil {
		return ref, &apiError{Status: http.StatusBadRequest, Code: "bad_ref", Message: err.Error()}
	}
	return ref, nil
}

func (d *Daemon) listTasks(ctx context.Context, q ops.ListQuery) (ops.TaskList, error) {
	f := index.Filter{Plan: q.Plan, All: q.All, Cursor: q.Cursor, Wave: q.Wave, Limit: q.Limit, Statuses: q.Statuses, Kind: q.Kind}
	for _, st := range q.Statuses {
		if !st.Valid() {
			return ops.TaskList{}, &apiError{Status: http.StatusBadRequest, Code: "bad_status",
				Message: "unknown status " + strconv.Quote(string(st)) + " (want one of " + joinStrings(queue.Statuses) + ")"}
		}
	}
	if q.Kind != "" && !slices.Contains(queue.Kinds, q.Kind) {
		return ops.TaskList{}, &apiError{Status: http.StatusBadRequest, Code: "bad_kind",
			Message: "unknown kind " + strconv.Quote(string(q.Kind)) + " (want one of " + joinStrings(queue.Kinds) + ")"}
	}
	page, err := d.e.List(ctx, f)
	if err != nil {
		return ops.TaskList{}, err
	}
	return taskList(page), nil
}

func (d *Daemon) getTask(ctx context.Context, req ops.TaskRef) (snag.TaskDetail, error) {
	ref, err := taskRef(req.Ref)
	if err != nil {
		return snag.TaskDetail{}, err
	}
	st, it, err := d.e.Verification(ctx, ref) // it: the row as the runs agree with
	if err != nil {
		return snag.TaskDetail{}, err
	}
	var v *snag.VerifyState
	if st.Running || st.Outcome != "" {
		st.History = nil // GET /verify/{ref} has it
		v = &st
	}
	return taskDetail(ctx, d.e, it, v), nil
}
