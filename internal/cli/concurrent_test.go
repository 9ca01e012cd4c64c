package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/snagdev/snag/internal/taskgen"
)

// scriptEnv is the environment a script's snag commands run with, for
// commands that start snag processes themselves.
func scriptEnv(ts *testscript.TestScript) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "SNAG_HOME", "SNAG_USER", "USER", "SNAG_PORT", "GORACE",
		"SNAG_NO_AUTOSTART", "SNAG_CACHE", "TMPDIR", "XDG_CACHE_HOME"} {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// snagCmd is a snag process as the script would run it, in the script's
// current folder.
func snagCmd(ts *testscript.TestScript, args ...string) *exec.Cmd {
	path, err := exec.LookPath("snag")
	if err != nil {
		// PATH inside the script is not this process's: look there.
		for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
			if fi, err := os.Stat(filepath.Join(dir, "snag")); err == nil && !fi.IsDir() {
				path = filepath.Join(dir, "snag")
				break
			}
		}
	}
	if path == "" {
		ts.Fatalf("no snag program on the script's PATH")
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	return cmd
}

// cmdRenameCtl renames a file to a name that may hold control characters,
// written as Go escapes: renamectl OLD NEW, where NEW may have \n, \t or
// \x1b (a script cannot hold them in a name).
func cmdRenameCtl(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: renamectl OLD NEW")
	}
	to, err := strconv.Unquote(`"` + args[1] + `"`)
	ts.Check(err)
	ts.Check(os.Rename(ts.MkAbs(args[0]), ts.MkAbs(to)))
}

// cmdGenTasks writes N generated task files into DIR: gentasks N DIR.
func cmdGenTasks(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: gentasks N DIR")
	}
	n, err := strconv.Atoi(args[0])
	ts.Check(err)
	ts.Check(taskgen.Write(ts.MkAbs(args[1]), n, 1))
}

// cmdConcurrently starts N copies of one snag command at the same instant
// and waits for them all: concurrently N snag ARGS... Every one must exit 0
// and print the same output; the script's stdout is that output and its
// stderr all of theirs.
func cmdConcurrently(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || args[1] != "snag" {
		ts.Fatalf("usage: concurrently N snag ARGS...")
	}
	n, err := strconv.Atoi(args[0])
	ts.Check(err)
	type result struct {
		out, errOut bytes.Buffer
		err         error
	}
	res := make([]result, n)
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = snagCmd(ts, args[2:]...)
		cmds[i].Stdout, cmds[i].Stderr = &res[i].out, &res[i].errOut
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i].err = cmd.Run()
		}()
	}
	close(start)
	wg.Wait()
	var stderr strings.Builder
	var failed []string
	for i := range res {
		stderr.WriteString(res[i].errOut.String())
		switch {
		case res[i].err != nil:
			failed = append(failed, fmt.Sprintf("run %d of %d: %v\n%s", i+1, n, res[i].err, res[i].errOut.String()))
		case res[i].out.String() != res[0].out.String():
			failed = append(failed, fmt.Sprintf("run %d of %d printed other output than run 1:\n%s\nrun 1:\n%s", i+1, n, res[i].out.String(), res[0].out.String()))
		}
	}
	fmt.Fprint(ts.Stdout(), res[0].out.String())
	fmt.Fprint(ts.Stderr(), stderr.String())
	if len(failed) > 0 {
		ts.Fatalf("%d of %d failed:\n%s", len(failed), n, strings.Join(failed, "\n"))
	}
}

// cmdFirstUse starts LISTS snag list and MCPS snag mcp at the same instant
// in a fresh project with no daemon, ROUNDS times: firstuse ROUNDS LISTS
// MCPS. Every list must answer from the daemon they start, every snag mcp
// must answer initialize and a snag_list from the daemon, and exactly one
// snagd must serve each project afterwards.
func cmdFirstUse(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: firstuse ROUNDS LISTS MCPS")
	}
	var nums [3]int
	for i, a := range args {
		n, err := strconv.Atoi(a)
		ts.Check(err)
		nums[i] = n
	}
	rounds, lists, mcps := nums[0], nums[1], nums[2]
	for round := range rounds {
		dir := fmt.Sprintf("first-use-%d", round)
		ts.Check(os.Mkdir(ts.MkAbs(dir), 0o755))
		root := ts.MkAbs(dir)
		init := snagCmd(ts, "init")
		init.Dir = root
		if out, err := init.CombinedOutput(); err != nil {
			ts.Fatalf("round %d: snag init: %v\n%s", round, err, out)
		}
		ts.Check(taskgen.Write(filepath.Join(root, ".snag", "tasks"), 30, int64(round)))
		problems := firstUseRound(ts, root, lists, mcps)
		daemons := waitOneDaemon(root)
		stopDaemons(func(a ...any) { ts.Logf("%s", fmt.Sprint(a...)) }, root)
		if len(daemons) != 1 {
			problems = append(problems, fmt.Sprintf("%d snagd serve the project afterwards (pids %v), want 1", len(daemons), daemons))
		}
		if len(problems) > 0 {
			log, _ := os.ReadFile(filepath.Join(root, ".snag", "snagd.log"))
			ts.Fatalf("round %d of %d:\n%s\nsnagd.log:\n%s", round+1, rounds, strings.Join(problems, "\n"), log)
		}
	}
}

func firstUseRound(ts *testscript.TestScript, root string, lists, mcps int) []string {
	var (
		mu       sync.Mutex
		problems []string
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	start := make(chan struct{})
	for i := range lists {
		cmd := snagCmd(ts, "list", "--json", "--all")
		cmd.Dir = root
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := cmd.Run(); err != nil {
				fail("snag list %d: %v\n%s", i, err, errOut.String())
				return
			}
			var got struct {
				Tasks  []json.RawMessage `json:"tasks"`
				Source string            `json:"source"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Source != "daemon" || len(got.Tasks) != 30 {
				fail("snag list %d answered %d tasks from %q (want 30 from the daemon); stderr:\n%s", i, len(got.Tasks), got.Source, errOut.String())
			}
		}()
	}
	for i := range mcps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if msg := mcpFirstCalls(ts, root); msg != "" {
				fail("snag mcp %d: %s", i, msg)
			}
		}()
	}
	close(start)
	wg.Wait()
	return problems
}

// mcpFirstCalls runs snag mcp, sends initialize and a snag_list call, and
// says what went wrong, if anything.
func mcpFirstCalls(ts *testscript.TestScript, root string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := snagCmd(ts, "mcp")
	cmd.Dir = root
	in, err := cmd.StdinPipe()
	if err != nil {
		return err.Error()
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return err.Error()
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		return err.Error()
	}
	defer func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(outPipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	answer := func(id int) (map[string]any, string) {
		for {
			select {
			case <-ctx.Done():
				return nil, fmt.Sprintf("no answer to request %d in 60 s; stderr:\n%s", id, errOut.String())
			case line, ok := <-lines:
				if !ok {
					return nil, fmt.Sprintf("stdout closed before the answer to request %d; stderr:\n%s", id, errOut.String())
				}
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil && m["id"] == float64(id) {
					return m, ""
				}
			}
		}
	}
	io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"first-use","version":"0"}}}`+"\n")
	if _, msg := answer(1); msg != "" {
		return msg
	}
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"snag_list","arguments":{}}}`+"\n")
	m, msg := answer(2)
	if msg != "" {
		return msg
	}
	res, _ := m["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if sc["source"] != "daemon" {
		b, _ := json.Marshal(m)
		return fmt.Sprintf("snag_list did not answer from the daemon: %s; stderr:\n%s", b, errOut.String())
	}
	return ""
}

// waitOneDaemon waits until at most one snag daemon process serves root
// (the ones that lost the race for the lock exit at once) and returns the
// pids of those that do.
func waitOneDaemon(root string) []int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := daemonsOf(root)
		if len(pids) <= 1 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// daemonsOf lists the live processes run as snagd --root root.
func daemonsOf(root string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
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
		if len(args) < 3 || filepath.Base(args[0]) != "snagd" || args[1] != "--root" || args[2] != root || exited(pid) {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
