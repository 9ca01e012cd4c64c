package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/snagdev/snag/internal/cli"
	"github.com/snagdev/snag/internal/cli/full"
	"github.com/snagdev/snag/internal/snagdtest"
)

// exitFileEnv names the file the snag command writes its exit code to, so
// that the exitcode command can check it: testscript itself only knows
// whether a command failed, not how.
const exitFileEnv = "SNAG_TEST_EXITFILE"

var update = flag.Bool("update", false, "rewrite the expected files of failing cmp stdout lines in testdata/script")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		// snag is the snag program, without the full part: its commands
		// that need that part run snagd's program, as the real one does.
		"snag": func() {
			exit(cli.Main(signalled(), os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
		},
		// snagd is snagd's program: the daemon, and with snag as its first
		// argument, the full command line.
		"snagd": func() {
			ctx := signalled()
			if len(os.Args) > 1 && os.Args[1] == cli.SnagdArg {
				exit(cli.Main(ctx, os.Args[2:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Full: full.New()}))
			}
			if err := full.New().Daemon(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
				msg := err.Error() // said once, as snagd's main does
				if !strings.HasPrefix(msg, "snagd: ") {
					msg = "snagd: " + msg
				}
				fmt.Fprintln(os.Stderr, msg)
				os.Exit(1)
			}
			os.Exit(0)
		},
	})
}

// signalled is a context that ends on SIGINT or SIGTERM, as the programs'.
func signalled() context.Context {
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return ctx
}

// exit ends a snag command with its code, written where exitcode reads it.
func exit(code int) {
	if f := os.Getenv(exitFileEnv); f != "" {
		if err := os.WriteFile(f, []byte(strconv.Itoa(code)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "snag test: write exit code:", err)
			os.Exit(125)
		}
	}
	os.Exit(code)
}

// TestScript runs the end-to-end scripts in testdata/script: each runs the
// real snag command line in a fresh work dir, with HOME and SNAG_HOME inside
// it and SNAG_USER=dana.
//
// Besides testscript's own commands, scripts have:
//
//	sample [DIR]                    copy ../.snag-example to DIR/.snag (DIR defaults to shop)
//	exitcode N                      the last snag command exited with code N
//	maxwidth N FILE                 no line of FILE (or stdout, stderr) is over N characters
//	replace [-re] FILE OLD NEW      replace OLD (a Go regexp with -re) by NEW in FILE; OLD must occur
//	json [-set VAR] FILE PATH       print the values PATH selects in the JSON document FILE
//	                                (with -set, store the one value in $VAR instead)
//	newport                         give the next snagd started a fresh $SNAG_PORT (one per project)
//	waitfile FILE [PATH REGEXP]     wait until FILE exists (and the JSON values PATH selects match)
//	await REGEXP snag ARGS...       run snag until its stdout matches (snagd sees a file edit
//	                                a moment after it is made)
//	gentasks N DIR                  write N generated task files into DIR
//	concurrently N snag ARGS...     start N snag commands at once: all must exit 0 with the
//	                                same stdout, which is the script's
//	renamectl OLD NEW               rename OLD to NEW, whose \n, \t and \x1b are control characters
//	firstuse ROUNDS LISTS MCPS      in a fresh project per round, start LISTS snag list and
//	                                MCPS snag mcp at once: all answer from the one snagd
//	                                they start
//
// A json PATH is dot-separated: a field name, an array index, * for every
// element of an array, field=value for the elements of an array whose field
// has that value, and a final @keys for an object's keys (sorted). Strings
// print bare, other values as compact JSON, one per line.
func TestScript(t *testing.T) { runScripts(t, filepath.Join("testdata", "script")) }

// TestScriptConcurrent runs the scripts in testdata/concurrent, which start
// many snag processes at once. They run after TestScript's, not beside
// them: on a small machine their load would slow the others' daemons past
// the scripts' deadlines.
func TestScriptConcurrent(t *testing.T) { runScripts(t, filepath.Join("testdata", "concurrent")) }

func runScripts(t *testing.T, dir string) {
	sample := snagdtest.SampleDir(t)
	if _, err := os.Stat(filepath.Join(sample, "tasks")); err != nil {
		t.Fatalf("the sample project: %v", err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                dir,
		RequireUniqueNames: true,
		UpdateScripts:      *update,
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, "home")
			if err := os.Mkdir(home, 0o755); err != nil {
				return err
			}
			env.Setenv("HOME", home)
			env.Setenv("SNAG_HOME", filepath.Join(home, ".snag"))
			env.Setenv("SNAG_USER", "dana")
			env.Setenv("USER", "dana")
			env.Setenv(exitFileEnv, filepath.Join(env.WorkDir, ".snag-exit-code"))
			// Under -race every snag process would sleep a second before
			// exiting, in case a goroutine is about to report a race; snag's
			// commands have finished their goroutines by then.
			if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
				env.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
			}
			// The first command that needs snagd starts one in the
			// background, on a port of its own; the script's end stops
			// every daemon it started.
			port, err := snagdtest.Port()
			if err != nil {
				return err
			}
			env.Setenv("SNAG_PORT", strconv.Itoa(port))
			env.Defer(func() { stopDaemons(env.T().Log, env.WorkDir) })
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"sample":       cmdSample,
			"exitcode":     cmdExitCode,
			"maxwidth":     cmdMaxWidth,
			"replace":      cmdReplace,
			"json":         cmdJSON,
			"newport":      cmdNewPort,
			"await":        cmdAwait,
			"waitfile":     cmdWaitFile,
			"gentasks":     cmdGenTasks,
			"concurrently": cmdConcurrently,
			"firstuse":     cmdFirstUse,
			"renamectl":    cmdRenameCtl,
			"follow":       cmdFollow,
		},
	})
}

// cmdSample copies the sample project's .snag folder into DIR/.snag.
func cmdSample(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 1 {
		ts.Fatalf("usage: sample [DIR]")
	}
	dir := "shop"
	if len(args) == 1 {
		dir = args[0]
	}
	dst := filepath.Join(ts.MkAbs(dir), ".snag")
	if _, err := os.Stat(dst); err == nil {
		ts.Fatalf("sample: %s already exists", dst)
	}
	snagdtest.CopySample(ts, ts.MkAbs(dir))
	// Should snag have been run in the sample folder, leave its index
	// and port behind: every script starts from the files alone.
	for _, f := range []string{"snag.db", "snag.db-wal", "snag.db-shm", ".port"} {
		if err := os.Remove(filepath.Join(dst, f)); err != nil && !os.IsNotExist(err) {
			ts.Fatalf("sample: %v", err)
		}
	}
}

// cmdExitCode checks the exit code of the last snag command.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: exitcode N")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	f := ts.Getenv(exitFileEnv)
	b, err := os.ReadFile(f)
	if err != nil {
		ts.Fatalf("exitcode: no snag command ran since the last exitcode check")
	}
	ts.Check(os.Remove(f))
	got, err := strconv.Atoi(string(b))
	ts.Check(err)
	if got != want {
		ts.Fatalf("snag exited with code %d, want %d", got, want)
	}
}

// cmdMaxWidth checks that no line of a file is wider than N characters.
func cmdMaxWidth(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: maxwidth N FILE")
	}
	n, err := strconv.Atoi(args[0])
	ts.Check(err)
	text := ts.ReadFile(args[1])
	if text == "" {
		ts.Fatalf("maxwidth: %s is empty", args[1])
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if w := utf8.RuneCountInString(line); w > n {
			ts.Fatalf("%s line %d is %d characters wide (want at most %d):\n%s", args[1], i+1, w, n, line)
		}
	}
}

// cmdReplace edits a file in place, as a person's editor would.
func cmdReplace(ts *testscript.TestScript, neg bool, args []string) {
	re := len(args) > 0 && args[0] == "-re"
	if re {
		args = args[1:]
	}
	if neg || len(args) != 3 {
		ts.Fatalf("usage: replace [-re] FILE OLD NEW")
	}
	name, old, repl := ts.MkAbs(args[0]), args[1], args[2]
	b, err := os.ReadFile(name)
	ts.Check(err)
	var out string
	if re {
		rx, err := regexp.Compile(old)
		ts.Check(err)
		if !rx.Match(b) {
			ts.Fatalf("replace: %s does not match %s", old, args[0])
		}
		out = rx.ReplaceAllString(string(b), repl)
	} else {
		if !strings.Contains(string(b), old) {
			ts.Fatalf("replace: %q is not in %s", old, args[0])
		}
		out = strings.ReplaceAll(string(b), old, repl)
	}
	fi, err := os.Stat(name)
	ts.Check(err)
	ts.Check(os.WriteFile(name, []byte(out), fi.Mode()&fs.ModePerm))
}

// cmdJSON parses a JSON document and prints the values a path selects.
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	var set string
	if len(args) > 1 && args[0] == "-set" {
		set, args = args[1], args[2:]
	}
	if neg || len(args) != 2 {
		ts.Fatalf("usage: json [-set VAR] FILE PATH")
	}
	vals, err := jsonPath([]byte(ts.ReadFile(args[0])), args[1])
	if err != nil {
		ts.Fatalf("json: %s: %v", args[0], err)
	}
	if set != "" {
		s, ok := vals[0].(string)
		if len(vals) != 1 || !ok {
			ts.Fatalf("json -set: %s selects %d values, want one string", args[1], len(vals))
		}
		ts.Setenv(set, s)
		return
	}
	fmt.Fprint(ts.Stdout(), jsonLines(vals))
}

// jsonPath selects the values PATH names in a JSON document.
func jsonPath(doc []byte, path string) ([]any, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	vals := []any{v}
	if path != "." {
		for _, seg := range strings.Split(path, ".") {
			var next []any
			for _, v := range vals {
				got, err := selectJSON(v, seg)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", path, err)
				}
				next = append(next, got...)
			}
			vals = next
		}
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("%s selects nothing", path)
	}
	return vals, nil
}

// jsonLines prints strings bare and other values as compact JSON, a line each.
func jsonLines(vals []any) string {
	var b strings.Builder
	for _, v := range vals {
		if s, ok := v.(string); ok {
			b.WriteString(s + "\n")
			continue
		}
		j, _ := json.Marshal(v)
		b.Write(j)
		b.WriteString("\n")
	}
	return b.String()
}

// cmdWaitFile waits, for at most ten seconds, until FILE exists and, given
// PATH and REGEXP, until the JSON values PATH selects in it match REGEXP
// (snagd rewrites plan.json a moment after a change).
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || (len(args) != 1 && len(args) != 3) {
		ts.Fatalf("usage: waitfile FILE [PATH REGEXP]")
	}
	var re *regexp.Regexp
	if len(args) == 3 {
		var err error
		re, err = regexp.Compile("(?m)" + args[2])
		ts.Check(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(ts.MkAbs(args[0]))
		if err == nil && re == nil {
			return
		}
		if err == nil {
			vals, err := jsonPath(b, args[1])
			if err == nil {
				last = jsonLines(vals)
				if re.MatchString(last) {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("waitfile %s: not there, or never matched (last: %q)", strings.Join(args, " "), last)
}

func selectJSON(v any, seg string) ([]any, error) {
	switch v := v.(type) {
	case map[string]any:
		if seg == "@keys" {
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			out := make([]any, len(keys))
			for i, k := range keys {
				out[i] = k
			}
			return out, nil
		}
		f, ok := v[seg]
		if !ok {
			return nil, fmt.Errorf("no field %q", seg)
		}
		return []any{f}, nil
	case []any:
		if seg == "*" {
			return v, nil
		}
		if field, want, ok := strings.Cut(seg, "="); ok {
			var out []any
			for _, e := range v {
				if m, ok := e.(map[string]any); ok && fmt.Sprint(m[field]) == want {
					out = append(out, e)
				}
			}
			return out, nil
		}
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= len(v) {
			return nil, fmt.Errorf("%q is not an index of an array of %d", seg, len(v))
		}
		return []any{v[i]}, nil
	}
	return nil, fmt.Errorf("cannot select %q in %T", seg, v)
}

func cmdNewPort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: newport")
	}
	port := snagdtest.FreePort(ts)
	ts.Setenv("SNAG_PORT", strconv.Itoa(port))
}

// cmdAwait runs a snag command until its stdout matches, for at most ten
// seconds; the last run's stdout and stderr are the script's.
func cmdAwait(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || args[1] != "snag" {
		ts.Fatalf("usage: await REGEXP snag ARGS...")
	}
	re, err := regexp.Compile("(?m)" + args[0])
	ts.Check(err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ts.Exec("snag", args[2:]...)
		if err == nil && re.MatchString(ts.ReadFile("stdout")) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("snag %s: stdout never matched %q (last error: %v)", strings.Join(args[2:], " "), args[0], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdFollow starts a following snag command, runs another once it has
// printed its first output, and reads the follower's output until a line
// matches, for at most thirty seconds: follow REGEXP snag FOLLOW-ARGS --
// snag ARGS... The follower's output is the script's stdout.
func cmdFollow(ts *testscript.TestScript, neg bool, args []string) {
	sep := slices.Index(args, "--")
	if neg || len(args) < 4 || args[1] != "snag" || sep < 0 || sep+2 > len(args) || args[sep+1] != "snag" {
		ts.Fatalf("usage: follow REGEXP snag FOLLOW-ARGS -- snag ARGS...")
	}
	re, err := regexp.Compile(args[0])
	ts.Check(err)
	follower := snagCmd(ts, args[2:sep]...)
	var stderr bytes.Buffer
	follower.Stderr = &stderr
	out, err := follower.StdoutPipe()
	ts.Check(err)
	ts.Check(follower.Start())
	defer func() { follower.Process.Kill(); follower.Wait() }()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got strings.Builder
	deadline := time.After(30 * time.Second)
	acted := false
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				follower.Wait()
				ts.Fatalf("snag %s ended before a line matched %q:\n%s%s", strings.Join(args[2:sep], " "), args[0], got.String(), stderr.String())
			}
			got.WriteString(line + "\n")
			if !acted {
				// Its first output is printed: it follows from here on.
				acted = true
				if b, err := snagCmd(ts, args[sep+2:]...).CombinedOutput(); err != nil {
					ts.Logf("snag %s: %v\n%s", strings.Join(args[sep+2:], " "), err, b)
				}
			}
			if re.MatchString(line) {
				fmt.Fprint(ts.Stdout(), got.String())
				return
			}
		case <-deadline:
			ts.Fatalf("no line of snag %s matched %q in 30 s:\n%s", strings.Join(args[2:sep], " "), args[0], got.String())
		}
	}
}

// stopDaemons stops every snagd the script's commands started: each holds
// the lock of its project's .snag/ and names its pid there.
func stopDaemons(log func(args ...any), dir string) {
	var pids []int
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "snagd.lock" {
			b, _ := os.ReadFile(path)
			pid, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
			if n, err := strconv.Atoi(pid); err == nil && n > 0 {
				pids = append(pids, n)
			}
		}
		return nil
	})
	for _, pid := range pids {
		if syscall.Kill(pid, syscall.SIGTERM) != nil {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for !exited(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				log(fmt.Sprintf("snagd (pid %d) ignored SIGTERM for 10 s: killed", pid))
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// exited reports whether a process is gone or a zombie.
func exited(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
