package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snagdev/snag/internal/snagdtest"
)

// repo is a git repository holding a copy of the sample project, with
// worktrees of it beside the main one, and the environment its snag
// commands run with: their own SNAG_HOME and a port of the test's, so an
// autostarted snagd never meets another test's.
type repo struct {
	main, home string
	port       int
	trees      []string // every worktree's project root, the main one first
	bin        string   // the snag program its commands run
}

// requireGit skips a test without git, or fails it in CI.
func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed: .ci/run must install it")
		}
		t.Skip("git is not installed")
	}
}

// newRepo makes the repository with n worktrees in all (the main one among
// them), each on a branch of its own.
func newRepo(t testing.TB, n int) *repo {
	t.Helper()
	requireGit(t)
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &repo{main: filepath.Join(tmp, "shop"), home: filepath.Join(tmp, "home"), port: snagdtest.FreePort(t), bin: snagBin}
	snagdtest.CopySample(t, r.main)
	os.Remove(filepath.Join(r.main, ".snag", "plan.json"))
	wtGit(t, r.main, "init", "-q", "-b", "main")
	wtGit(t, r.main, "add", ".")
	wtGit(t, r.main, "commit", "-q", "-m", "tasks")
	r.trees = []string{r.main}
	for i := 1; i < n; i++ {
		wt := filepath.Join(tmp, fmt.Sprintf("shop-%d", i))
		wtGit(t, r.main, "worktree", "add", "-q", "-b", fmt.Sprintf("feature-%d", i), wt)
		r.trees = append(r.trees, wt)
	}
	t.Cleanup(func() { r.stopDaemons(t) })
	return r
}

func (r *repo) environ() []string {
	return append(os.Environ(), "SNAG_HOME="+r.home, "SNAG_PORT="+strconv.Itoa(r.port), "SNAG_NO_AUTOSTART=")
}

// snag runs the snag command line in dir and returns its output and error.
func (r *repo) snag(dir string, args ...string) (string, error) {
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = dir
	cmd.Env = r.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("snag %s in %s: %w: %s", strings.Join(args, " "), dir, err, errb.String())
	}
	return out.String(), nil
}

// mustSnag is snag, failing the test on an error.
func (r *repo) mustSnag(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := r.snag(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bridge connects an MCP client to a snag mcp started in dir.
func (r *repo) bridge(t testing.TB, dir string, args ...string) (*sdk.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(r.bin, append([]string{"mcp"}, args...)...)
	cmd.Dir = dir
	cmd.Env = r.environ()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-test", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Errorf("snag mcp in %s: %v", dir, err)
		return nil, cmd
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd
}

// claimed is what an agent's claim-next answered: the task, when one was
// granted, and where the answer came from.
type claimed struct {
	Source string `json:"source"`
	Task   *struct {
		ID, Key, Assignee string
	} `json:"task"`
}

// claimNext calls snag_claim {} in session cs: an error when the call
// failed or the tool answered one.
func claimNext(cs *sdk.ClientSession) (claimed, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var sc claimed
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "snag_claim", Arguments: map[string]any{}})
	if err != nil {
		return sc, err
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &sc)
	if res.IsError {
		var txt string
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				txt += tc.Text
			}
		}
		return sc, fmt.Errorf("%s", txt)
	}
	return sc, nil
}

// daemons lists the pids of the snagd processes serving the repository
// (snagd --root one of its worktrees, or of the task worktrees a test
// adds beside them), from /proc.
func (r *repo) daemons() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) < 3 || filepath.Base(args[0]) != "snagd" {
			continue
		}
		// Any worktree of the test's folder: the task worktrees a test adds
		// (shop.snag/SNAG-11) are not among r.trees, and a snagd started in
		// one serves the whole repository.
		if i := slices.Index(args, "--root"); i > 0 && i+1 < len(args) && strings.HasPrefix(args[i+1], filepath.Dir(r.main)+string(filepath.Separator)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readyFromFiles lists the keys of the tasks claim-next may hand out, as
// snag reads them from the main worktree's files with no daemon.
func (r *repo) readyFromFiles(t testing.TB) []string {
	t.Helper()
	out := r.mustSnag(t, r.main, "list", "--json", "--no-autostart")
	var list struct {
		Tasks []struct {
			Key, Status, State string
			BlockedBy          []string `json:"blocked_by"`
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("snag list --json: %v\n%s", err, out)
	}
	var keys []string
	for _, task := range list.Tasks {
		if task.Status == "open" && task.State == "ok" && len(task.BlockedBy) == 0 {
			keys = append(keys, task.Key)
		}
	}
	return keys
}

// stopDaemons ends every snagd of the repository and waits until they are gone.
func (r *repo) stopDaemons(t testing.TB) {
	// A bridge that saw its snagd go may be starting another (autostart):
	// stop until none has been seen for a moment, so the cleanup of the
	// folders meets no snagd writing into them.
	give := time.Now().Add(60 * time.Second)
	for quiet := 0; quiet < 3 && time.Now().Before(give); {
		pids := r.daemons()
		if len(pids) == 0 {
			quiet++
			time.Sleep(100 * time.Millisecond)
			continue
		}
		quiet = 0
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGTERM)
		}
		deadline := time.Now().Add(20 * time.Second)
		for len(r.daemons()) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		for _, pid := range r.daemons() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestR1_OrchestratedStart: 14 worktrees of one repository and no snagd
// running; in each, a snag list and a snag mcp agent's claim-next,
// released from one start line, as an orchestrator launches its agents.
// Every worktree is served, by one snagd, and no task is granted twice:
// the sample's ready tasks go to as many agents, and the others are told
// nothing is ready.
func TestR1_OrchestratedStart(t *testing.T) {
	t.Parallel()
	const n = 14
	r := newRepo(t, n)
	ready := r.readyFromFiles(t)
	if len(ready) == 0 || len(ready) >= n {
		t.Fatalf("the sample has %d ready tasks; the test wants some, and fewer than its %d agents", len(ready), n)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := map[string]string{} // task id -> the worktree whose agent got it
	names := map[string]string{}   // an agent's name -> its worktree
	var nothing, failed, keys []string
	for _, tree := range r.trees {
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			out, err := r.snag(tree, "list")
			mu.Lock()
			defer mu.Unlock()
			if err != nil || !strings.Contains(out, "SNAG-") {
				failed = append(failed, fmt.Sprintf("snag list in %s: %v\n%s", tree, err, out))
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			cs, _ := r.bridge(t, tree)
			if cs == nil {
				return
			}
			sc, err := claimNext(cs)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed = append(failed, fmt.Sprintf("snag_claim in %s: %v", tree, err))
			case sc.Source != "daemon":
				failed = append(failed, fmt.Sprintf("snag_claim in %s answered from %s, not the daemon", tree, sc.Source))
			case sc.Task == nil:
				nothing = append(nothing, tree)
			case granted[sc.Task.ID] != "":
				failed = append(failed, fmt.Sprintf("%s was granted twice: in %s and in %s", sc.Task.Key, granted[sc.Task.ID], tree))
			case names[sc.Task.Assignee] != "":
				failed = append(failed, fmt.Sprintf("two agents are named %s: in %s and in %s", sc.Task.Assignee, names[sc.Task.Assignee], tree))
			default:
				granted[sc.Task.ID] = tree
				names[sc.Task.Assignee] = tree
				keys = append(keys, sc.Task.Key)
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, f := range failed {
		t.Error(f)
	}
	if len(granted) != len(ready) || len(nothing) != n-len(ready) {
		t.Errorf("%d tasks granted (%v) and %d agents told nothing is ready; want the %d ready tasks %v granted once each and %d told",
			len(granted), keys, len(nothing), len(ready), ready, n-len(ready))
	}
	// The daemons that lost the repository's lock exit at once.
	waitFor(t, 10*time.Second, func() bool { return len(r.daemons()) == 1 },
		func() string {
			return fmt.Sprintf("%d snagd serve the repository; want 1: pids %v", len(r.daemons()), r.daemons())
		})
}

// TestR2_WritesLandWhereAsked: one snagd, started from one worktree, serves
// the others through views of their own: an add, an agent's add and a note
// made in worktree B land in B's files and nowhere else, and a key is
// minted once in the whole repository. A restart begun in a task's
// worktree reads the main worktree's queue.
func TestR2_WritesLandWhereAsked(t *testing.T) {
	t.Parallel()
	r := newRepo(t, 3)
	a, b := r.trees[1], r.trees[2] // the daemon starts in a, not in the main worktree
	r.mustSnag(t, a, "add", "Started the daemon here")
	added := r.mustSnag(t, b, "add", "--json", "Added in B")
	var got struct{ Key, Path string }
	if err := json.Unmarshal([]byte(added), &got); err != nil {
		t.Fatalf("snag add --json: %v\n%s", err, added)
	}
	if _, err := os.Stat(filepath.Join(b, got.Path)); err != nil {
		t.Errorf("the file snag add --json in B names, relative to B: %v", err)
	}
	cs, _ := r.bridge(t, b)
	res, txt, sc := call(t, cs, "snag_add", map[string]any{"title": "Found by the agent in B", "body": "steps"})
	mustOK(t, "snag_add in B", res, txt)
	agentKey, _ := sc["key"].(string)
	r.mustSnag(t, b, "note", "add", "Chose the B way", "--type", "decision")
	for _, c := range []struct {
		tree, glob string
		want       int
	}{
		{b, ".snag/tasks/" + got.Key + " - *.md", 1},
		{b, ".snag/tasks/" + agentKey + " - *.md", 1},
		{b, ".snag/notes/N-* - Chose the B way.md", 1},
		{a, ".snag/tasks/" + got.Key + " - *.md", 0},
		{a, ".snag/tasks/" + agentKey + " - *.md", 0},
		{a, ".snag/notes/N-* - Chose the B way.md", 0},
		{r.main, ".snag/tasks/" + got.Key + " - *.md", 0},
		{r.main, ".snag/tasks/" + agentKey + " - *.md", 0},
	} {
		m, _ := filepath.Glob(filepath.Join(c.tree, c.glob))
		if len(m) != c.want {
			t.Errorf("%s in %s: %d files; want %d", c.glob, c.tree, len(m), c.want)
		}
	}
	keys := map[string][]string{}
	for _, tree := range r.trees {
		m, _ := filepath.Glob(filepath.Join(tree, ".snag", "tasks", "*.md"))
		for _, f := range m {
			k, _, _ := strings.Cut(filepath.Base(f), " ")
			keys[k] = append(keys[k], tree)
		}
	}
	for _, k := range []string{"SNAG-21", "SNAG-22", "SNAG-23"} {
		if len(keys[k]) != 1 {
			t.Errorf("%s is in %d worktrees' files (%v); want one", k, len(keys[k]), keys[k])
		}
	}
	if n := len(r.daemons()); n != 1 {
		t.Errorf("%d snagd serve the repository; want 1", n)
	}

	// A restart begun in a task's worktree reads the main worktree's
	// queue, not the branch's stale checkout of it.
	taskTree := filepath.Join(filepath.Dir(r.main), "shop.snag", "SNAG-11")
	wtGit(t, r.main, "worktree", "add", "-q", "-b", "snag/SNAG-11", taskTree)
	r.mustSnag(t, r.main, "cancel", "SNAG-12")
	r.stopDaemons(t)
	out := r.mustSnag(t, taskTree, "list", "--json", "--all")
	var list struct {
		Tasks []struct{ Key, Status string }
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("snag list --json in the task's worktree: %v\n%s", err, out)
	}
	for _, task := range list.Tasks {
		if task.Key == "SNAG-12" && task.Status != "cancelled" {
			t.Errorf("SNAG-12 reads as %s in a task's worktree after a restart begun there; the main worktree cancelled it", task.Status)
		}
	}
	if status := r.mustSnag(t, taskTree, "daemon", "status"); !strings.Contains(status, "serves "+r.main) || !strings.Contains(status, "a task's") {
		t.Errorf("snag daemon status in a task's worktree:\n%s\nwant the main worktree's view, said so", status)
	}
	if _, err := os.Stat(filepath.Join(taskTree, ".snag", "snag.db")); err == nil {
		t.Error("the task's worktree got an index of its own")
	}
}

// taskFiles reads every task file of the project at root: key -> ids, and
// id -> key.
func taskFiles(t testing.TB, root string) (byKey map[string][]string, byID map[string]string) {
	t.Helper()
	byKey, byID = map[string][]string{}, map[string]string{}
	m, _ := filepath.Glob(filepath.Join(root, ".snag", "tasks", "*.md"))
	for _, f := range m {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // renamed since the listing (a key being settled): a later look sees it
		}
		if err != nil {
			t.Fatal(err)
		}
		var id, key string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = strings.Trim(strings.TrimSpace(v), `'"`)
			}
			if v, ok := strings.CutPrefix(line, "key: "); ok {
				key = strings.Trim(strings.TrimSpace(v), `'"`)
			}
		}
		byKey[key] = append(byKey[key], id)
		byID[id] = key
	}
	return byKey, byID
}

// TestR3_KeysNeverCollide: two worktrees adding at once share one
// sequence, so their keys never meet; a clone that added offline, pulled
// in, leaves keys that two tasks share, and snagd settles them by itself:
// the task created first keeps its key, the other gets a new one by an
// edit of its key: line and a rename of its file, its id unchanged, and
// the renumbering is in the audit log.
func TestR3_KeysNeverCollide(t *testing.T) {
	t.Parallel()
	r := newRepo(t, 2)
	main, wt := r.trees[0], r.trees[1]
	r.mustSnag(t, main, "list") // the daemon, before the adds race
	var wg sync.WaitGroup
	for i := range 10 {
		for _, tree := range []string{main, wt} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.snag(tree, "add", fmt.Sprintf("Added %d in %s", i, filepath.Base(tree))); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	keysMain, _ := taskFiles(t, main)
	keysWT, _ := taskFiles(t, wt)
	for k, ids := range keysWT {
		if other := keysMain[k]; len(other) > 0 && other[0] != ids[0] {
			t.Errorf("%s is %s in one worktree and %s in the other", k, other[0], ids[0])
		}
	}
	if len(keysMain) != 30 || len(keysWT) != 30 {
		t.Errorf("%d keys in the main worktree and %d in the other; want 30 each", len(keysMain), len(keysWT))
	}

	// Adds at once while a person hand-writes files with the next keys:
	// once snagd has seen them, no key is shared, and no id changed.
	_, before := taskFiles(t, main)
	next := len(keysMain) + 21 // the worktrees' adds took 21..40
	var hand []string
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.snag(main, "add", fmt.Sprintf("Raced %d", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	for i := range 10 {
		id := fmt.Sprintf("tsk_01M9HAND%018d", i)
		hand = append(hand, id)
		name := filepath.Join(main, ".snag", "tasks", fmt.Sprintf("SNAG-%d - Written by hand %d.md", next+i, i))
		body := fmt.Sprintf("---\nid: %s\nkey: SNAG-%d\ntitle: Written by hand %d\nstatus: open\ntrust: vetted\nseverity: low\nkind: chore\nwave: 3\ncreated: %s\n---\nBy hand.\n",
			id, next+i, i, time.Now().UTC().Format(time.RFC3339))
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	waitFor(t, 30*time.Second, func() bool {
		byKey, _ := taskFiles(t, main)
		for _, ids := range byKey {
			if len(ids) > 1 {
				return false
			}
		}
		return true
	}, func() string {
		byKey, _ := taskFiles(t, main)
		return fmt.Sprintf("keys still shared after the race: %v", byKey)
	})
	_, raced := taskFiles(t, main)
	if len(raced) != len(before)+50 {
		t.Errorf("%d tasks after 40 adds and 10 hand-written files beside %d; want %d", len(raced), len(before), len(before)+50)
	}
	for _, id := range hand {
		if raced[id] == "" {
			t.Errorf("the hand-written task %s is gone", id)
		}
	}
	for id, key := range before {
		if raced[id] != key {
			t.Errorf("%s was %s before the race and is %q after", id, key, raced[id])
		}
	}

	// An offline clone and its origin each add SNAG-21..23; the clone's
	// history is pulled in.
	r2 := newRepo(t, 1)
	main = r2.main
	clone := filepath.Join(filepath.Dir(main), "clone")
	wtGit(t, main, "clone", "-q", main, clone)
	rc := &repo{main: clone, home: r2.home, port: snagdtest.FreePort(t), bin: r2.bin, trees: []string{clone}}
	t.Cleanup(func() { rc.stopDaemons(t) })
	for i := range 3 {
		r2.mustSnag(t, main, "add", fmt.Sprintf("Added in main %d", i))
	}
	var first struct{ ID, Key string }
	for i := range 3 { // made after main's: main's keep their keys
		out := rc.mustSnag(t, clone, "add", "--json", fmt.Sprintf("Added offline %d", i))
		if i == 0 {
			json.Unmarshal([]byte(out), &first)
		}
	}
	// A task that depends on the first of them, which will be renumbered:
	// snag writes the reference by id (its key in a comment), so it follows.
	var waiting struct{ Key, Path string }
	json.Unmarshal([]byte(rc.mustSnag(t, clone, "add", "--json", "--depends", first.Key, "Waits on offline 0")), &waiting)
	if b, err := os.ReadFile(filepath.Join(clone, waiting.Path)); err != nil || !strings.Contains(string(b), "depends_on: ["+first.ID+"] # "+first.Key+"\n") {
		t.Fatalf("the dependent's file does not name %s by id with its key %s beside it (%v):\n%s", first.ID, first.Key, err, b)
	}
	_, cloneIDs := taskFiles(t, clone)
	_, mainIDs := taskFiles(t, main)
	wtGit(t, clone, "add", "-A")
	wtGit(t, clone, "commit", "-q", "-m", "offline adds")
	wtGit(t, main, "add", "-A")
	wtGit(t, main, "commit", "-q", "-m", "more adds in main")
	wtGit(t, main, "pull", "-q", "--no-rebase", "--no-edit", clone, "main")

	r2.mustSnag(t, main, "list") // its snagd sees the merge
	var byKey map[string][]string
	var byID map[string]string
	waitFor(t, 30*time.Second, func() bool {
		byKey, byID = taskFiles(t, main)
		for _, ids := range byKey {
			if len(ids) > 1 {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("keys still shared 30 s after the pull: %v", byKey) })
	for id, key := range mainIDs {
		if byID[id] != key {
			t.Errorf("main's task %s was %s and is %q after the pull: the task made first keeps its key", id, key, byID[id])
		}
	}
	renumbered := 0
	for id, key := range cloneIDs {
		now, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("the clone's task %s (%s) is gone after the pull", id, key)
		case mainIDs[id] == "" && now == key && slices.Contains(slices.Collect(maps.Values(mainIDs)), key):
			t.Errorf("the clone's task %s kept %s, which a task made before it has", id, key)
		case now != key:
			renumbered++
		}
	}
	if renumbered != 3 {
		t.Errorf("%d of the clone's tasks were renumbered; want its 3 offline adds", renumbered)
	}
	if out := r2.mustSnag(t, main, "show", waiting.Key); !regexp.MustCompile(`(?m)^depends: +`+byID[first.ID]+`\b`).MatchString(out) || byID[first.ID] == first.Key {
		t.Errorf("%s depended on %s, renumbered %s: snag show says\n%s", waiting.Key, first.Key, byID[first.ID], out)
	}
	if out, _ := r2.snag(main, "doctor"); strings.Contains(out, "duplicate") {
		t.Errorf("snag doctor still finds duplicates:\n%s", out)
	}
	if out := r2.mustSnag(t, main, "log", "--limit", "200"); strings.Count(out, "renumber") < 3 {
		t.Errorf("the audit log has %d renumberings; want 3:\n%s", strings.Count(out, "renumber"), out)
	}
}

// TestR4_GitUnderAClaim: a claim leaves its task file modified, so a
// person's git pull is refused until they stash. git stash puts the file
// back as it was before the claim: the holder keeps its lease, the task
// reads as claimed by it, and another agent is granted neither it nor it
// by claim-next; after git stash pop the holder releases it. A claim and a
// release that changed nothing leave git status clean.
func TestR4_GitUnderAClaim(t *testing.T) {
	t.Parallel()
	r := newRepo(t, 1)
	main := r.main
	a, _ := r.bridge(t, main)
	b, _ := r.bridge(t, main)
	res, txt, sc := call(t, a, "snag_claim", map[string]any{"id": "SNAG-4"})
	mustOK(t, "claim SNAG-4", res, txt)
	status := func() string {
		cmd := exec.Command("git", "status", "--porcelain", "--", ".snag")
		cmd.Dir = main
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	if !strings.Contains(status(), "SNAG-4") {
		t.Fatalf("git status after the claim: %q; want SNAG-4's file modified", status())
	}
	wtGit(t, main, "stash")
	if s := status(); s != "" {
		t.Fatalf("git status after git stash: %q", s)
	}
	// snagd sees the file back as before the claim: the lease holds.
	waitFor(t, 10*time.Second, func() bool {
		out, _ := r.snag(main, "log", "--limit", "20")
		return strings.Contains(out, "lease_kept")
	}, func() string {
		out, _ := r.snag(main, "log", "--limit", "20")
		return "no lease_kept in the audit:\n" + out
	})
	res, txt, _ = call(t, b, "snag_claim", map[string]any{"id": "SNAG-4"})
	if !res.IsError {
		t.Errorf("another agent was granted SNAG-4 while its file was stashed: %s", txt)
	}
	_, _, got := call(t, b, "snag_get", map[string]any{"id": "SNAG-4"})
	if task, _ := got["task"].(map[string]any); task["status"] != "claimed" {
		t.Errorf("SNAG-4 reads as %v while stashed; want claimed by its holder", task["status"])
	}
	for range 6 { // every ready task but SNAG-4
		res, txt, sc = call(t, b, "snag_claim", nil)
		if task, _ := sc["task"].(map[string]any); task != nil && task["key"] == "SNAG-4" {
			t.Fatalf("claim-next granted SNAG-4 while its file was stashed: %s", txt)
		}
		if task, _ := sc["task"].(map[string]any); task != nil {
			call(t, b, "snag_release", map[string]any{"id": task["key"], "reason": "only looking"})
		}
		if res.IsError || sc["task"] == nil {
			break
		}
	}
	wtGit(t, main, "stash", "pop")
	res, txt, _ = call(t, a, "snag_release", map[string]any{"id": "SNAG-4", "reason": "done looking"})
	mustOK(t, "the holder's release after git stash pop", res, txt)
	if s := status(); s != "" {
		t.Errorf("git status after a claim and a release that changed nothing: %q; want it clean", s)
	}
}

// TestR5_UpgradeReplacesAnOlderSnagd: after an upgrade, the new snag finds
// the snagd an older version started and replaces it: the old one stops,
// one of the new version serves, snag daemon status says which, and the
// agent's lease taken under the old one is still held.
func TestR5_UpgradeReplacesAnOlderSnagd(t *testing.T) {
	t.Parallel()
	const stamp = "-X github.com/snagdev/snag/internal/version.stamp="
	old, err := bins.Build("snag-v0.1.0", snagdtest.Snag, "-ldflags", stamp+"v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	upgraded, err := bins.Build("snag-v0.2.0", snagdtest.Snag, "-ldflags", stamp+"v0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	r := newRepo(t, 1)
	r.bin = old
	r.mustSnag(t, r.main, "list")
	lockFile := filepath.Join(r.main, ".git", "snag", "snagd.lock")
	b, _ := os.ReadFile(lockFile)
	f := strings.Fields(string(b))
	if len(f) != 3 || f[2] != "v0.1.0" {
		t.Fatalf("the repository's lock says %q; want pid, port and v0.1.0", b)
	}
	oldPID, _ := strconv.Atoi(f[0])
	agent, _ := r.bridge(t, r.main)
	res, txt, _ := call(t, agent, "snag_claim", map[string]any{"id": "SNAG-4"})
	mustOK(t, "claim under the old snagd", res, txt)

	r.bin = upgraded
	r.mustSnag(t, r.main, "list")
	if err := syscall.Kill(oldPID, 0); err == nil {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", oldPID)); !strings.Contains(string(st), ") Z") {
			t.Errorf("the old snagd (pid %d) still runs after the upgraded snag's first command", oldPID)
		}
	}
	status := r.mustSnag(t, r.main, "daemon", "status")
	if !strings.HasPrefix(status, "snagd v0.2.0 serves "+r.main) {
		t.Errorf("snag daemon status after the upgrade:\n%s\nwant snagd v0.2.0", status)
	}
	r.bin = old
	if status := r.mustSnag(t, r.main, "daemon", "status"); !strings.Contains(status, "this snag is v0.1.0") {
		t.Errorf("snag daemon status of an older snag does not say both versions:\n%s", status)
	}
	r.bin = upgraded
	out := r.mustSnag(t, r.main, "list", "--json", "--all")
	var list struct {
		Tasks []struct{ Key, Status, Assignee string }
	}
	json.Unmarshal([]byte(out), &list)
	for _, task := range list.Tasks {
		if task.Key == "SNAG-4" && (task.Status != "claimed" || task.Assignee == "") {
			t.Errorf("SNAG-4 is %s (%q) after the upgrade; want still claimed by its agent", task.Status, task.Assignee)
		}
	}
}

// requireUnshare returns util-linux's unshare, for a test that runs snag
// in a namespace of its own (flag -n, -m): it needs root, which CI has; it
// skips without them, and fails in CI.
func requireUnshare(t *testing.T, flag string) string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err == nil && os.Geteuid() != 0 {
		err = fmt.Errorf("not root")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("unshare %s needs util-linux's unshare and root (CI runs as root): %v", flag, err)
		}
		t.Skipf("unshare %s: %v", flag, err)
	}
	return unshare
}

// TestR5_LoopbackDown: in a sandbox whose loopback interface is down (a
// network namespace of its own), a port on 127.0.0.1 can be bound but not
// reached. The snagd a command starts there finds it cannot reach itself
// and stops, giving up the repository's lock, and the command reads from
// the files at once, saying why, instead of waiting for ever.
func TestR5_LoopbackDown(t *testing.T) {
	t.Parallel()
	unshare := requireUnshare(t, "-n")
	r := newRepo(t, 1)
	cmd := exec.Command(unshare, "-n", r.bin, "list")
	cmd.Dir = r.main
	cmd.Env = r.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("snag list with the loopback down: %v\n%s%s", err, out.String(), errb.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("snag list with the loopback down still waits after 60 s:\n%s", errb.String())
	}
	if !strings.Contains(errb.String(), "loopback interface") || !strings.Contains(errb.String(), "read from the files") {
		t.Errorf("snag list with the loopback down says:\n%s\nwant the cause and that it read the files", errb.String())
	}
	if !strings.Contains(out.String(), "SNAG-") {
		t.Errorf("snag list with the loopback down printed no tasks:\n%s", out.String())
	}
	waitFor(t, 10*time.Second, func() bool { return len(r.daemons()) == 0 },
		func() string { return fmt.Sprintf("a snagd nobody can reach still runs: %v", r.daemons()) })
}

// TestR2_FileClaimsAcrossWorktrees: file claims are the repository's: an
// agent in one worktree claiming a path an agent in another worktree holds
// is refused, naming the holder; both see each other's claims; a shared
// claim beside a shared one is granted.
func TestR2_FileClaimsAcrossWorktrees(t *testing.T) {
	t.Parallel()
	r := newRepo(t, 2)
	a, _ := r.bridge(t, r.trees[0], "--toolsets", "queue,team")
	b, _ := r.bridge(t, r.trees[1], "--toolsets", "queue,team")
	res, txt, _ := call(t, a, "snag_files", map[string]any{"action": "claim", "paths": []string{"web/checkout.ts"}})
	mustOK(t, "the first worktree's agent claims", res, txt)
	res, txt, _ = call(t, b, "snag_files", map[string]any{"action": "claim", "paths": []string{"web"}})
	if !res.IsError || !strings.Contains(txt, "holds web/checkout.ts") {
		t.Errorf("a claim of web from the other worktree over a held web/checkout.ts: %s; want it refused naming the holder", txt)
	}
	res, txt, _ = call(t, b, "snag_files", map[string]any{"action": "claim", "paths": []string{"docs/**"}, "exclusive": false})
	mustOK(t, "a claim of other paths from the other worktree", res, txt)
	out := r.mustSnag(t, r.trees[0], "files")
	if !strings.Contains(out, "web/checkout.ts") || !strings.Contains(out, "docs/**") {
		t.Errorf("snag files in the first worktree does not list both worktrees' claims:\n%s", out)
	}
}

// TestR5_ReadOnlyHome: with $HOME mounted read-only (as some sandboxes do)
// and its cache folder already there, reads still work: from the files
// through a temporary private index, and, when snagd cannot start for want
// of a token folder, the command says so and names the fix.
func TestR5_ReadOnlyHome(t *testing.T) {
	t.Parallel()
	unshare := requireUnshare(t, "-m")
	r := newRepo(t, 1)
	home := filepath.Join(t.TempDir(), "home")
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && k != "SNAG_HOME" && k != "XDG_CACHE_HOME" && k != "SNAG_CACHE" {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "SNAG_PORT="+strconv.Itoa(r.port), "SNAG_NO_AUTOSTART=")
	run := func(readOnly bool, args ...string) (string, string, error) {
		script := `exec "$0" "$@"`
		if readOnly {
			script = `mount --bind -o ro "$HOME" "$HOME" && exec "$0" "$@"`
		}
		cmd := exec.Command(unshare, append([]string{"-m", "sh", "-c", script, r.bin}, args...)...)
		cmd.Dir, cmd.Env = r.main, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, errs, err := run(false, "list", "--no-autostart"); err != nil { // the cache folder is made
		t.Fatalf("snag list with a writable $HOME: %v\n%s", err, errs)
	}
	out, errs, err := run(true, "list", "--no-autostart")
	if err != nil || !strings.Contains(out, "SNAG-") {
		t.Errorf("snag list --no-autostart with $HOME read-only: %v\n%s%s", err, out, errs)
	}
	out, errs, err = run(true, "list")
	if err != nil || !strings.Contains(out, "SNAG-") {
		t.Errorf("snag list with $HOME read-only: %v\n%s%s", err, out, errs)
	}
	if !strings.Contains(errs, "set $SNAG_HOME to a folder you can write") {
		t.Errorf("snag list with $HOME read-only does not name the fix for snagd:\n%s", errs)
	}
}

// TestR2_TaskWorktreeBesideMain: an agent in a feature worktree claims
// with a worktree of its own. The task's worktree is made beside the main
// worktree (../shop.snag/KEY), not beside or inside the feature worktree,
// and its branch starts from the repository's default branch, not from
// the feature branch's unmerged commit.
func TestR2_TaskWorktreeBesideMain(t *testing.T) {
	t.Parallel()
	r := newRepo(t, 2)
	feature := r.trees[1]
	if err := os.WriteFile(filepath.Join(feature, "feature.txt"), []byte("unmerged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wtGit(t, feature, "add", "feature.txt")
	wtGit(t, feature, "commit", "-q", "-m", "unmerged feature work")
	cs, _ := r.bridge(t, feature)
	res, txt, sc := call(t, cs, "snag_claim", map[string]any{"worktree": true})
	mustOK(t, "snag_claim with a worktree in the feature worktree", res, txt)
	task, _ := sc["task"].(map[string]any)
	key, _ := task["key"].(string)
	path, _ := sc["worktree"].(string)
	if want := filepath.Join(filepath.Dir(r.main), "shop.snag", key); path != want {
		t.Fatalf("the task's worktree is %q, want %q beside the main worktree\n%s", path, want, txt)
	}
	head := func(dir, rev string) string {
		out, err := exec.Command("git", "-C", dir, "rev-parse", rev).Output()
		if err != nil {
			t.Fatalf("git rev-parse %s in %s: %v", rev, dir, err)
		}
		return strings.TrimSpace(string(out))
	}
	if got, want := head(path, "HEAD"), head(r.main, "main"); got != want {
		t.Errorf("the task's branch starts at %s, want main's %s (the feature branch is at %s)", got, want, head(feature, "HEAD"))
	}
	if _, err := os.Stat(filepath.Join(path, "feature.txt")); err == nil {
		t.Error("the task's worktree holds the feature branch's unmerged file")
	}
}

// TestR3_KeysSettledAcrossWorktrees: a person hand-writes, in a feature
// worktree, a task file under a key that a task of the main worktree has
// (another id): the branches' merge would make it a shared key. snagd
// settles it before the branches meet, by the rule of a shared key: the
// task made first keeps it, in whichever worktree it is, and the other is
// renumbered in its own worktree, its id unchanged.
func TestR3_KeysSettledAcrossWorktrees(t *testing.T) {
	t.Parallel()
	r := newRepo(t, 2)
	main, feature := r.trees[0], r.trees[1]
	var added struct{ ID, Key string }
	json.Unmarshal([]byte(r.mustSnag(t, main, "add", "--json", "Made in main")), &added)
	r.mustSnag(t, feature, "list") // the feature worktree's view is open
	write := func(id, key, title string, created time.Time) {
		t.Helper()
		body := fmt.Sprintf("---\nid: %s\nkey: %s\ntitle: %s\nstatus: open\ntrust: vetted\nseverity: low\nkind: chore\nwave: 3\ncreated: %s\n---\nBy hand.\n",
			id, key, title, created.UTC().Format(time.RFC3339))
		if err := os.WriteFile(filepath.Join(feature, ".snag", "tasks", key+" - "+title+".md"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	settled := func(id, want string, in string, renumbered bool) {
		t.Helper()
		waitFor(t, 30*time.Second, func() bool {
			_, byID := taskFiles(t, in)
			return byID[id] != "" && (byID[id] != want) == renumbered
		}, func() string {
			_, byID := taskFiles(t, in)
			return fmt.Sprintf("%s in %s is %q; want it renumbered: %v (from %s)", id, in, byID[id], renumbered, want)
		})
	}
	// Written later than main's task: the hand-written one gives the key up.
	later := "tsk_01M9HANDXX0000000000000001"
	write(later, added.Key, "Written later", time.Now().Add(time.Hour))
	settled(later, added.Key, feature, true)
	if _, byID := taskFiles(t, main); byID[added.ID] != added.Key {
		t.Errorf("main's task %s is %q after the feature's later file was settled; want it to keep %s", added.ID, byID[added.ID], added.Key)
	}
	// Written as made before main's task: main's gives the key up, in main.
	var second struct{ ID, Key string }
	json.Unmarshal([]byte(r.mustSnag(t, main, "add", "--json", "Made in main too")), &second)
	earlier := "tsk_01M9HANDYY0000000000000002"
	write(earlier, second.Key, "Written earlier", time.Now().Add(-24*time.Hour))
	settled(second.ID, second.Key, main, true)
	if _, byID := taskFiles(t, feature); byID[earlier] != second.Key {
		t.Errorf("the feature's earlier task %s is %q; want it to keep %s", earlier, byID[earlier], second.Key)
	}
	if out := r.mustSnag(t, main, "log", "--limit", "50"); !strings.Contains(out, "renumber") {
		t.Errorf("main's audit log has no renumbering:\n%s", out)
	}
}
