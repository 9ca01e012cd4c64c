package verify_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/verify"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line string
		want []string
	}{
		{"go test ./...", []string{"go", "test", "./..."}},
		{"  go   test\t./... ", []string{"go", "test", "./..."}},
		{"go test -run 'TestA|TestB$' ./x", []string{"go", "test", "-run", "TestA|TestB$", "./x"}},
		{`echo "a b" 'c d'`, []string{"echo", "a b", "c d"}},
		{`echo "say \"hi\"" "\$HOME" "a\\b" "a\b"`, []string{"echo", `say "hi"`, "$HOME", `a\b`, `a\b`}},
		{`echo a\ b \| \; \$x \~`, []string{"echo", "a b", "|", ";", "$x", "~"}},
		{`echo '' ""`, []string{"echo", "", ""}},
		{`echo a'b'"c"d`, []string{"echo", "abcd"}},
		{"echo a\\\nb", []string{"echo", "ab"}},
		{"echo 'two\nlines'", []string{"echo", "two\nlines"}},
		{`sh -c "make lint; make test"`, []string{"sh", "-c", "make lint; make test"}},
		{"go test -run=X ./...", []string{"go", "test", "-run=X", "./..."}},
		{"npm run test -- a#b", []string{"npm", "run", "test", "--", "a#b"}},
		{"'FOO=1' env", []string{"FOO=1", "env"}},
		{"env FOO=1 make", []string{"env", "FOO=1", "make"}},
		{"échoé ünïcode", []string{"échoé", "ünïcode"}},
	} {
		t.Run(c.line, func(t *testing.T) {
			got, err := verify.Split(c.line)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("Split(%q) (-want +got):\n%s", c.line, diff)
			}
		})
	}
}

func TestSplitRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line  string
		shell bool   // the error is ErrNeedsShell
		want  string // in the error
	}{
		{"go test | tee log", true, `unquoted | (or quote it: '|')`},
		{"make && make test", true, "unquoted &"},
		{"sleep 1 &", true, "unquoted &"},
		{"make; make test", true, "unquoted ;"},
		{"go test > log", true, "unquoted >"},
		{"wc -l < f", true, "unquoted <"},
		{"(cd x)", true, "unquoted ("},
		{"echo $HOME", true, "unquoted $"},
		{"echo `id`", true, "unquoted `"},
		{`echo "$HOME"`, true, "$ inside double quotes"},
		{"echo \"`id`\"", true, "` inside double quotes"},
		{"ls *.go", true, "unquoted *"},
		{"ls a?", true, "unquoted ?"},
		{"ls [ab]", true, "unquoted ["},
		{"echo {a,b}", true, "unquoted {"},
		{"ls ~/x", true, "unquoted ~"},
		{"make\nmake test", true, "line break"},
		{"make # the tests", true, "unquoted #"},
		{"CGO_ENABLED=0 go test", true, "variable assignment CGO_ENABLED="},
		{"  X=1", true, "variable assignment X="},
		{"echo 'open", false, "single quote at byte 6 is never closed"},
		{`echo "open`, false, "double quote at byte 6 is never closed"},
		{`echo \`, false, "ends in a backslash"},
		{"", false, "the command is empty"},
		{" \t ", false, "the command is empty"},
		{"echo a\x00b", false, "control character"},
	} {
		t.Run(c.line, func(t *testing.T) {
			got, err := verify.Split(c.line)
			if err == nil {
				t.Fatalf("Split(%q) = %q, want an error", c.line, got)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Split(%q): %v\nwant it to say %q", c.line, err, c.want)
			}
			if errors.Is(err, verify.ErrNeedsShell) != c.shell {
				t.Errorf("Split(%q): errors.Is(err, ErrNeedsShell) = %v, want %v", c.line, !c.shell, c.shell)
			}
			if c.shell && !strings.Contains(err.Error(), `this command needs a shell: set "verify": {"shell": true} in .snag/config.json, or write it without`) {
				t.Errorf("Split(%q): %v\nwant it to name the fix", c.line, err)
			}
		})
	}
}

func run(t *testing.T, c verify.Command) verify.CommandResult {
	t.Helper()
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
	if c.Timeout == 0 {
		c.Timeout = time.Minute
	}
	res, err := verify.RunCommand(context.Background(), c)
	if err != nil {
		t.Fatalf("RunCommand(%q): %v", c.Line, err)
	}
	return res
}

func TestRunPasses(t *testing.T) {
	t.Parallel()
	res := run(t, verify.Command{Line: "true"})
	if !res.Passed() || res.ExitCode != 0 || res.TimedOut || res.Tail != "" {
		t.Errorf("true: %+v", res)
	}
}

func TestRunFails(t *testing.T) {
	t.Parallel()
	for _, c := range []verify.Command{
		{Line: `sh -c "echo to stdout; echo to stderr >&2; exit 3"`},
		{Line: `echo to stdout; echo to stderr >&2; exit 3`, Shell: true},
	} {
		t.Run(c.Line, func(t *testing.T) {
			res := run(t, c)
			if res.Passed() || res.ExitCode != 3 || res.TimedOut {
				t.Errorf("got %+v, want exit code 3", res)
			}
			if res.Tail != "to stdout\nto stderr" {
				t.Errorf("Tail = %q, want both streams, in order", res.Tail)
			}
		})
	}
}

func TestRunStdinIsEmpty(t *testing.T) {
	t.Parallel()
	// cat with no file reads stdin: /dev/null ends it at once.
	res := run(t, verify.Command{Line: "cat"})
	if !res.Passed() || res.Tail != "" {
		t.Errorf("cat: %+v", res)
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	var many strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&many, "line %d\n", i)
	}
	var wantMany []string
	for i := 99981; i <= 100000; i++ {
		wantMany = append(wantMany, "line "+strconv.Itoa(i))
	}
	long := strings.Repeat("é", 300) // 600 bytes a line
	for _, c := range []struct {
		name, out string
		want      func(t *testing.T, tail string)
	}{
		{"more than 64 KiB: the last 20 lines", many.String(), func(t *testing.T, tail string) {
			if diff := cmp.Diff(strings.Join(wantMany, "\n"), tail); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		}},
		{"long lines: at most 2000 bytes, whole characters", strings.Repeat(long+"\n", 10), func(t *testing.T, tail string) {
			if len(tail) > verify.TailBytes {
				t.Errorf("Tail is %d bytes, want at most %d", len(tail), verify.TailBytes)
			}
			if !strings.HasSuffix(tail, long) || len(tail) < verify.TailBytes-1 {
				t.Errorf("Tail is not the last %d bytes: %q", verify.TailBytes, tail)
			}
			if !utf8.ValidString(tail) {
				t.Errorf("Tail is not valid UTF-8: %q", tail)
			}
		}},
		{"invalid UTF-8 is replaced", "ok \xff\xfe done\n", func(t *testing.T, tail string) {
			if tail != "ok \uFFFD done" {
				t.Errorf("Tail = %q", tail)
			}
		}},
		{"a last line with no newline", "a\nb", func(t *testing.T, tail string) {
			if tail != "a\nb" {
				t.Errorf("Tail = %q", tail)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "out"), []byte(c.out), 0o644); err != nil {
				t.Fatal(err)
			}
			res := run(t, verify.Command{Dir: dir, Line: "cat out"})
			if !res.Passed() {
				t.Fatalf("cat out: %+v", res)
			}
			c.want(t, res.Tail)
		})
	}
}

// pids waits for the files the command writes its pids to and reads them.
func pids(t *testing.T, dir string, names ...string) []int {
	t.Helper()
	var out []int
	for _, n := range names {
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
				out = append(out, pid)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the command never wrote its pid to %s", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out
}

// gone waits until no process of the group pgid is alive (a zombie
// waiting for its reaper is not alive), and each pid is gone or a zombie.
func gone(t *testing.T, pgid int, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive []int
		for _, pid := range pids {
			if !exited(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 && !groupAlive(pgid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still alive after the run: %v (group %d)", alive, pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// groupAlive reports whether any process not a zombie is in group pgid.
func groupAlive(pgid int) bool {
	des, _ := os.ReadDir("/proc")
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		state, group, ok := stat(pid)
		if ok && group == pgid && state != 'Z' {
			return true
		}
	}
	return false
}

func exited(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	state, _, ok := stat(pid)
	return !ok || state == 'Z'
}

// stat reads a process's state and process group from /proc.
func stat(pid int) (state byte, pgid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:]) // state ppid pgrp ...
	if i < 0 || len(f) < 3 {
		return 0, 0, false
	}
	pgid, err = strconv.Atoi(f[2])
	return f[0][0], pgid, err == nil
}

func TestTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := run(t, verify.Command{
		Dir:     dir,
		Line:    "echo $$ > sh.pid; sleep 60 & echo $! > bg.pid; echo started; sleep 60",
		Shell:   true,
		Timeout: 500 * time.Millisecond,
	})
	if !res.TimedOut || res.ExitCode != -1 || res.Passed() {
		t.Errorf("got %+v, want a timeout with exit code -1", res)
	}
	if res.Tail != "started" {
		t.Errorf("Tail = %q, want what it wrote before it timed out", res.Tail)
	}
	p := pids(t, dir, "sh.pid", "bg.pid")
	gone(t, p[0], p...)
}

func TestContextEndKillsTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join(dir, "bg.pid")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	res, err := verify.RunCommand(ctx, verify.Command{
		Dir:     dir,
		Line:    "echo $$ > sh.pid; sleep 60 & echo $! > bg.pid; sleep 60",
		Shell:   true,
		Timeout: time.Minute,
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RunCommand: %v, want context.Canceled", err)
	}
	if res.Passed() || res.TimedOut {
		t.Errorf("got %+v, want neither a pass nor a timeout", res)
	}
	p := pids(t, dir, "sh.pid", "bg.pid")
	gone(t, p[0], p...)

	if _, err := verify.RunCommand(ctx, verify.Command{Dir: dir, Line: "touch marker"}); !errors.Is(err, context.Canceled) {
		t.Errorf("RunCommand with an ended context: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "marker")); err == nil {
		t.Error("RunCommand with an ended context started the command")
	}
}

func TestExitKillsWhatItLeftBehind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := run(t, verify.Command{
		Dir:   dir,
		Line:  "echo $$ > sh.pid; sleep 60 & echo $! > bg.pid; echo done",
		Shell: true,
	})
	if !res.Passed() || res.Tail != "done" {
		t.Errorf("got %+v, want a pass", res)
	}
	p := pids(t, dir, "sh.pid", "bg.pid")
	gone(t, p[0], p...)
}

func TestRunCannotStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "check.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  verify.Command
		want string
	}{
		{verify.Command{Dir: dir, Line: "snag-no-such-program --flag"}, `program "snag-no-such-program" not found on snagd's PATH: install it, or fix verify.command`},
		{verify.Command{Dir: dir, Line: "./missing.sh"}, `program "./missing.sh" not found in ` + dir},
		{verify.Command{Dir: dir, Line: "./check.sh"}, `program "./check.sh" is not executable: chmod +x it`},
		{verify.Command{Dir: filepath.Join(dir, "nope"), Line: "true"}, "is not there"},
		{verify.Command{Dir: dir, Line: "make | tee log"}, "needs a shell"},
		{verify.Command{Dir: dir, Line: ""}, "the command is empty"},
		{verify.Command{Dir: dir, Line: " ", Shell: true}, "the command is empty"},
	} {
		t.Run(c.cmd.Line, func(t *testing.T) {
			res, err := verify.RunCommand(context.Background(), c.cmd)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("RunCommand(%q) = %+v, %v; want an error saying %q", c.cmd.Line, res, err, c.want)
			}
		})
	}
}

func TestShellNotFoundIsAResult(t *testing.T) {
	t.Parallel()
	// Through a shell, a missing program is the shell's exit code 127.
	res := run(t, verify.Command{Line: "snag-no-such-program", Shell: true})
	if res.ExitCode != 127 || !strings.Contains(res.Tail, "snag-no-such-program") {
		t.Errorf("got %+v, want exit code 127 and the shell's message", res)
	}
}

func TestShellPipes(t *testing.T) {
	t.Parallel()
	res := run(t, verify.Command{Line: "printf 'a\\nb\\nc\\n' | grep -c . && test $(echo x | wc -c) -eq 2", Shell: true})
	if !res.Passed() || res.Tail != "3" {
		t.Errorf("got %+v, want a pass printing 3", res)
	}
}

func TestDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, shell := range []bool{false, true} {
		res := run(t, verify.Command{Dir: dir, Line: "pwd -P", Shell: shell})
		if res.Tail != want {
			t.Errorf("shell %v: pwd printed %q, want %q", shell, res.Tail, want)
		}
	}
	// A relative program path is relative to Dir.
	if err := os.WriteFile(filepath.Join(dir, "check.sh"), []byte("#!/bin/sh\necho checked\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if res := run(t, verify.Command{Dir: dir, Line: "./check.sh"}); !res.Passed() || res.Tail != "checked" {
		t.Errorf("./check.sh: %+v", res)
	}
}

// TestMarker checks that a command does what it says when it runs, and
// nothing when it is refused.
func TestMarker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	for _, line := range []string{"touch marker; touch other", "touch marker && true", "touch $HOME/marker"} {
		if _, err := verify.RunCommand(context.Background(), verify.Command{Dir: dir, Line: line}); !errors.Is(err, verify.ErrNeedsShell) {
			t.Errorf("RunCommand(%q): %v, want ErrNeedsShell", line, err)
		}
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Fatalf("a refused command created %v", des)
	}
	run(t, verify.Command{Dir: dir, Line: "touch 'marker'"})
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("touch marker did not create it: %v", err)
	}
	run(t, verify.Command{Dir: dir, Line: "touch marker2 && touch marker3", Shell: true})
	for _, m := range []string{"marker2", "marker3"} {
		if _, err := os.Stat(filepath.Join(dir, m)); err != nil {
			t.Errorf("through a shell, %s was not created: %v", m, err)
		}
	}
}

// TestFailingLinesOutliveAStackTrace: a test run whose failing assertion
// is followed by a long stack trace: Tail holds the trace's end, Failing
// the lines that say what failed, whatever runner printed them.
func TestFailingLinesOutliveAStackTrace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		runner, failing string
	}{
		{"go test", "    cart_test.go:42: total = 1199, want 1200"},
		{"pytest", "E       AssertionError: assert 1199 == 1200"},
		{"jest", "    Expected: 1200"},
		{"tap", "not ok 3 - total is rounded"},
	} {
		t.Run(c.runner, func(t *testing.T) {
			dir := t.TempDir()
			var out strings.Builder
			out.WriteString("running 12 tests\nok 1 - loads\n" + c.failing + "\n")
			for i := range 60 {
				fmt.Fprintf(&out, "    at frame%d (/app/node_modules/lib/x.js:%d:7)\n", i, i)
			}
			if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte(out.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			res := run(t, verify.Command{Dir: dir, Line: "cat out.txt; exit 1", Shell: true})
			if strings.Contains(res.Tail, c.failing) {
				t.Fatalf("the failing line is in Tail: the test shows nothing")
			}
			if !slices.Contains(res.Failing, c.failing) {
				t.Errorf("Failing = %q, want it to hold %q", res.Failing, c.failing)
			}
			if len(res.Failing) > verify.FailingLines {
				t.Errorf("Failing has %d lines, at most %d", len(res.Failing), verify.FailingLines)
			}
		})
	}
}
