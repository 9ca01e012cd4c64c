package board

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
)

// personActions are the moves a person may make from a status.
func personActions(st queue.Status) []Action {
	switch st {
	case queue.StatusInbox:
		return []Action{{Name: "promote", Label: "Promote"}, {Name: "reject", Label: "Reject", Danger: true}}
	case queue.StatusOpen, queue.StatusClaimed, queue.StatusVerifying:
		return []Action{{Name: "accept", Label: "Mark done"}, {Name: "cancel", Label: "Cancel", Danger: true}}
	case queue.StatusNeedsReview:
		return []Action{{Name: "accept", Label: "Resolve"}, {Name: "reopen", Label: "Reopen"}, {Name: "cancel", Label: "Cancel", Danger: true}}
	case queue.StatusResolved, queue.StatusCancelled:
		return []Action{{Name: "reopen", Label: "Reopen"}}
	}
	return nil
}

// endAgent ends an agent's session for the person logged in to the board:
// its tasks go back to the queue.
func (s *Server) endAgent(w http.ResponseWriter, r *http.Request) {
	ss := s.formSession(w, r, "the CLI has snag agents end")
	if ss == nil {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.answer(w, r, http.StatusBadRequest, "Refused", "no such session: the agents page lists the live ones", "")
		return
	}
	end, err := call(r.Context(), s, ops.EndSession, ops.EndRequest{ID: id, By: ss.By, Reason: r.PostForm.Get("reason")})
	if err != nil {
		s.answer(w, r, statusOf(err), "Refused", err.Error(), "")
		return
	}
	s.done(w, r, fmt.Sprintf("ended %s's session: %d task(s) back in the queue", end.Name, end.Released))
}

// back is where a plain form post returns to: a path on this board.
func back(r *http.Request) string {
	b := r.PostForm.Get("back")
	if !strings.HasPrefix(b, "/") || strings.HasPrefix(b, "//") || strings.HasPrefix(b, "/\\") || !pagePath.MatchString(strings.SplitN(b, "?", 2)[0]) {
		return "/"
	}
	return b
}

// done answers a form that worked: JSON for the script, a redirect back for
// a plain post.
func (s *Server) done(w http.ResponseWriter, r *http.Request, message string) {
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, formAnswer{OK: true, Message: message})
		return
	}
	http.Redirect(w, r, back(r), http.StatusSeeOther)
}

// act makes one move on a task for the person logged in to the board.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	ss := s.formSession(w, r, "the CLI and scripts use the JSON API")
	if ss == nil {
		return
	}
	msg, status := s.move(r.Context(), r.PathValue("ref"), r.PathValue("action"), r.PostForm, ss.By)
	if status != http.StatusOK {
		s.answer(w, r, status, "Refused", msg, "")
		return
	}
	s.done(w, r, msg)
}

// addTask files a person's task from the board's form, and goes to its page.
func (s *Server) addTask(w http.ResponseWriter, r *http.Request) {
	ss := s.formSession(w, r, "the CLI and scripts use the JSON API")
	if ss == nil {
		return
	}
	f := r.PostForm
	req := api.AddRequest{Title: f.Get("title"), Kind: f.Get("kind"), Severity: f.Get("severity"), Plan: strings.TrimSpace(f.Get("plan")),
		Files: lines(f.Get("files")), DependsOn: refs(f.Get("depends_on")), Body: strings.ReplaceAll(f.Get("body"), "\r\n", "\n"), By: ss.By}
	if v := strings.TrimSpace(f.Get("wave")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 9999 {
			s.answer(w, r, http.StatusBadRequest, "Refused", "wave: want a whole number from 1 to 9999", "")
			return
		}
		req.Wave = n
	}
	added, err := call(r.Context(), s, ops.AddTask, req)
	if err != nil {
		s.answer(w, r, statusOf(err), "Refused", err.Error(), "")
		return
	}
	msg := added.Key + " added"
	if len(added.Warnings) > 0 {
		msg += "; note: " + strings.Join(added.Warnings, "; ")
	}
	to := "/task/" + added.Key
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, formAnswer{OK: true, Message: msg, Redirect: to})
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// edit changes a task's fields from the task page's form: every field the
// form sends, and depends_on as the difference from what the task has.
func (s *Server) edit(ctx context.Context, ref string, f url.Values, by string) (string, int) {
	cur, err := s.task(ctx, ref)
	if err != nil {
		return err.Error(), statusOf(err)
	}
	req := api.EditRequest{Ref: ref, By: by}
	text := func(name string) *string {
		if _, ok := f[name]; !ok {
			return nil
		}
		v := strings.TrimSpace(f.Get(name))
		return &v
	}
	req.Title, req.Severity, req.Kind, req.Plan = text("title"), text("severity"), text("kind"), text("plan")
	if v := text("wave"); v != nil {
		n, err := strconv.Atoi(*v)
		if err != nil || n < 0 || n > 9999 {
			return "wave: want a whole number from 0 to 9999", http.StatusBadRequest
		}
		req.Wave = &n
	}
	if _, ok := f["files"]; ok {
		files := lines(f.Get("files"))
		if files == nil {
			files = []string{}
		}
		req.Files = &files
	}
	if _, ok := f["depends_on"]; ok {
		want := refs(f.Get("depends_on"))
		has := func(list []string, k string) bool {
			return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, k) })
		}
		for _, k := range want {
			if !has(cur.DependsOn, k) {
				req.AddDeps = append(req.AddDeps, k)
			}
		}
		for _, k := range cur.DependsOn {
			if !has(want, k) {
				req.RemoveDeps = append(req.RemoveDeps, k)
			}
		}
	}
	out, err := call(ctx, s, ops.Edit, req)
	if err != nil {
		return err.Error(), statusOf(err)
	}
	if len(out.Changed) == 0 {
		return out.Task.Key + ": nothing changed", http.StatusOK
	}
	msg := out.Task.Key + ": " + strings.Join(out.Changed, "; ")
	if len(out.Warnings) > 0 {
		msg += "; note: " + strings.Join(out.Warnings, "; ")
	}
	return msg, http.StatusOK
}

// lines are the non-empty lines of a textarea, trimmed.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// refs are task references typed into one field, split at commas and
// spaces.
func refs(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// bulk makes one move on each selected task.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request) {
	ss := s.formSession(w, r, "the CLI and scripts use the JSON API")
	if ss == nil {
		return
	}
	refs := r.PostForm["ref"]
	action := r.PostForm.Get("move")
	if len(refs) == 0 {
		s.answer(w, r, http.StatusBadRequest, "Nothing selected", "tick the items to "+action+" first", "")
		return
	}
	if action != "promote" && action != "reject" {
		s.answer(w, r, http.StatusBadRequest, "Refused", "a bulk action is promote or reject", "")
		return
	}
	var ok, failed []string
	for _, ref := range refs[:min(len(refs), 500)] {
		msg, status := s.move(r.Context(), ref, action, r.PostForm, ss.By)
		if status == http.StatusOK {
			ok = append(ok, ref)
		} else {
			failed = append(failed, msg)
		}
	}
	msg := ""
	if len(ok) > 0 {
		msg = map[string]string{"promote": "promoted ", "reject": "rejected "}[action] + strings.Join(ok, ", ")
	}
	if len(failed) > 0 {
		msg = strings.TrimPrefix(msg+"; refused: "+strings.Join(failed, "; "), "; ")
		s.answer(w, r, http.StatusConflict, "Some were refused", msg, "")
		return
	}
	s.done(w, r, msg)
}

// moves are the person's moves a form names that the move operation
// makes, but promote.
var moves = map[string]bool{string(queue.ActReject): true, string(queue.ActCancel): true, string(queue.ActReopen): true}

// move makes one move for a person. It returns a sentence for the person
// and 200, or why not and an HTTP status.
func (s *Server) move(ctx context.Context, ref, action string, form url.Values, by string) (string, int) {
	if _, err := queue.ParseRef(ref); err != nil {
		return err.Error(), http.StatusBadRequest
	}
	req := ops.TaskMove{Ref: ref, Action: action, MoveRequest: ops.MoveRequest{By: by}}
	op := ops.Move
	switch action {
	case "promote":
		return s.promote(ctx, req, form)
	case "accept":
		op, req.Action = ops.Accept, ""
	case "edit":
		return s.edit(ctx, ref, form, by)
	default:
		if !moves[action] {
			return "no such move: " + action, http.StatusNotFound
		}
	}
	m, err := call(ctx, s, op, req)
	if err != nil {
		return err.Error(), statusOf(err)
	}
	return fmt.Sprintf("%s is %s now", m.Key, strings.ReplaceAll(string(m.Status), "_", " ")), http.StatusOK
}

// promote moves a task from the inbox to the queue and, in the same
// write, sets the severity and wave the form chose (none chosen: the
// file's stay).
func (s *Server) promote(ctx context.Context, req ops.TaskMove, form url.Values) (string, int) {
	if v := form.Get("severity"); v != "" {
		if !slices.Contains(queue.Severities, queue.Severity(v)) {
			return "unknown severity " + strconv.Quote(v), http.StatusBadRequest
		}
		req.Severity = v
	}
	if v := strings.TrimSpace(form.Get("wave")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 9999 {
			return "wave: want a whole number from 1 to 9999", http.StatusBadRequest
		}
		req.Wave = n
	}
	m, err := call(ctx, s, ops.Move, req)
	if err != nil {
		return err.Error(), statusOf(err)
	}
	// The move's answer names the task and its status; the sentence says
	// the severity and wave it has now.
	it, err := s.task(ctx, m.ID)
	if err != nil || it.Task == nil {
		return m.Key + " promoted to open", http.StatusOK
	}
	return fmt.Sprintf("%s promoted to open (%s, wave %d)", m.Key, it.Task.Severity, it.Task.Wave), http.StatusOK
}

// planAct is a person's change of a plan's status from its page.
func (s *Server) planAct(w http.ResponseWriter, r *http.Request) {
	ss := s.formSession(w, r, "the CLI has snag plans")
	if ss == nil {
		return
	}
	slug, action := r.PathValue("slug"), r.PathValue("action")
	var to queue.PlanStatus
	for _, a := range planActions {
		if a.Name == action {
			to = a.Status
		}
	}
	if to == "" {
		s.answer(w, r, http.StatusBadRequest, "Refused", "no such move on a plan: activate, done, archive or draft", "")
		return
	}
	if _, err := call(r.Context(), s, ops.UpdatePlan, ops.PlanRequest{Slug: slug, Status: string(to), By: ss.By}); err != nil {
		s.answer(w, r, statusOf(err), "Refused", err.Error(), "")
		return
	}
	s.done(w, r, fmt.Sprintf("plan %s is %s", slug, to))
}

// formSession is the board session of a form's post, with the form read;
// without one (cli says what the CLI offers instead), or with a form that
// cannot be read, it answers the refusal and returns nil.
func (s *Server) formSession(w http.ResponseWriter, r *http.Request, cli string) *Session {
	ss := SessionOf(r)
	if ss == nil {
		s.answer(w, r, http.StatusForbidden, "Refused", "the board's forms are for a board session: "+cli, "")
		return nil
	}
	if err := r.ParseForm(); err != nil {
		s.answer(w, r, http.StatusBadRequest, "Refused", "the form could not be read: "+err.Error(), "")
		return nil
	}
	return ss
}
