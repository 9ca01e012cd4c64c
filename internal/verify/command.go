package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// Bounds of what a run keeps of its output.
const (
	OutputKeep = 64 << 10 // bytes of output kept while the command runs: the last ones
	TailLines  = 20       // lines in [CommandResult.Tail]
	TailBytes  = 2000     // bytes in [CommandResult.Tail], at most

	FailingLines     = 5   // lines in [CommandResult.Failing], at most
	FailingLineBytes = 200 // bytes of each
)

// drainWait is how long RunCommand keeps reading output after the
// command's process group is gone: only a process that left the group
// (setsid) can still hold the output open by then.
const drainWait = 2 * time.Second

// ErrNeedsShell is wrapped by the error [Split] returns for a command that
// only a shell could run as written.
var ErrNeedsShell = errors.New("this command needs a shell")

// Command is one verify command to run.
type Command struct {
	Dir   string // the working directory (the project root); "" is the current one
	Line  string // the command text
	Shell bool   // run Line through /bin/sh -c; otherwise split it with [Split]
	// Timeout bounds the run; 0 is no bound (snagd always sets one, from
	// verify.timeout_seconds).
	Timeout time.Duration
}

// CommandResult is how a command's run ended. ExitCode 0 passes.
type CommandResult struct {
	// ExitCode is the command's exit status; -1 when a signal ended it,
	// as when it timed out.
	ExitCode int
	// TimedOut is set when the command ran out of time and was killed.
	TimedOut bool
	// Tail is the end of what the command wrote to stdout and stderr
	// together: its last [TailLines] lines, at most [TailBytes] bytes, valid
	// UTF-8 (invalid bytes become U+FFFD).
	Tail string
	// Failing are the first lines of the output that name a failure (a
	// failed test or assertion, an error), at most [FailingLines] of at
	// most [FailingLineBytes] bytes each, wherever they are: a stack trace
	// at the end of the output pushes them out of Tail.
	Failing []string
	// Took is how long the command ran.
	Took time.Duration
}

// Passed reports whether the command passed: it exited 0 in time.
func (r CommandResult) Passed() bool { return r.ExitCode == 0 && !r.TimedOut }

// shellOnly are the characters a shell would interpret when unquoted.
const shellOnly = "|&;<>()$`*?[]{}~\n"

// assignment gives a leading NAME= of word (NAME a letter or _, then
// letters, digits and _), which a shell takes for a variable assignment
// rather than the command's name, or "". (Not a regexp: this package is
// in the snag program, which would compile it on every start.)
func assignment(word string) string {
	for i := range len(word) {
		c := word[i]
		switch {
		case c == '=' && i > 0:
			return word[:i+1]
		case c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9':
		default:
			return ""
		}
	}
	return ""
}

// Split splits a command line into words the way a POSIX shell does, with
// single quotes, double quotes and backslash escapes, but interprets
// nothing: a character only a shell gives a meaning to (| & ; < > ( ) $ `
// * ? [ ] { } ~, a line break, a # starting a word, a leading NAME=), when
// not quoted, is an error wrapping [ErrNeedsShell] that says how to turn
// the shell on. Inside double quotes, $ and ` are refused too, and a
// backslash escapes only $ ` " \ and a line break, as in a shell. An empty
// command is an error.
func Split(line string) ([]string, error) {
	s := splitter{line: line, firstEnd: -1}
	for s.i < len(line) {
		if err := s.step(); err != nil {
			return nil, err
		}
	}
	s.endWord(len(line))
	if len(s.words) == 0 {
		return nil, errors.New(`verify: the command is empty: write one in "verify": {"command": "..."}, or remove the key`)
	}
	if a := assignment(strings.TrimLeft(line[:s.firstEnd], " \t")); a != "" {
		return nil, needsShell(line, "variable assignment "+a+" (or quote it)")
	}
	return s.words, nil
}

// splitter is Split's state as it reads a command line left to right.
type splitter struct {
	line     string
	i        int // the next byte of line to read
	words    []string
	cur      strings.Builder // the word being read
	inWord   bool
	firstEnd int // where the first word ends in line, -1 until it has
}

// step reads what starts at s.i: a blank, which ends a word, a quoted
// string, an escape, or a plain byte, which goes on the word; or refuses
// a byte only a shell gives a meaning to.
func (s *splitter) step() error {
	ch := s.line[s.i]
	switch {
	case ch == ' ' || ch == '\t':
		s.endWord(s.i)
		s.i++
	case ch == '\'':
		return s.singleQuoted()
	case ch == '"':
		return s.doubleQuoted()
	case ch == '\\':
		return s.escape()
	case ch == '#' && !s.inWord:
		return needsShell(s.line, "# (a shell starts a comment there; quote it: '#')")
	case strings.IndexByte(shellOnly, ch) >= 0:
		what := fmt.Sprintf("%c (or quote it: '%c')", ch, ch)
		if ch == '\n' {
			what = "line break (put the command on one line)"
		}
		return needsShell(s.line, what)
	case ch < 0x20 || ch == 0x7f:
		return fmt.Errorf("verify: split %s: control character %#x at byte %d: remove it", show(s.line), ch, s.i+1)
	default:
		s.cur.WriteByte(ch)
		s.inWord = true
		s.i++
	}
	return nil
}

// endWord ends the word being read, if any, at byte i of the line.
func (s *splitter) endWord(i int) {
	if !s.inWord {
		return
	}
	if len(s.words) == 0 {
		s.firstEnd = i
	}
	s.words = append(s.words, s.cur.String())
	s.cur.Reset()
	s.inWord = false
}

// singleQuoted reads a single-quoted string, which takes every byte as
// it is up to the closing quote.
func (s *splitter) singleQuoted() error {
	j := strings.IndexByte(s.line[s.i+1:], '\'')
	if j < 0 {
		return fmt.Errorf("verify: split %s: a single quote at byte %d is never closed: add the closing '", show(s.line), s.i+1)
	}
	s.cur.WriteString(s.line[s.i+1 : s.i+1+j])
	s.inWord = true
	s.i += j + 2
	return nil
}

// doubleQuoted reads a double-quoted string, where a backslash escapes
// only $ ` " \ and a line break, and $ and ` are refused.
func (s *splitter) doubleQuoted() error {
	open := s.i
	s.inWord = true
	s.i++
	for {
		if s.i >= len(s.line) {
			return fmt.Errorf("verify: split %s: a double quote at byte %d is never closed: add the closing \"", show(s.line), open+1)
		}
		switch c := s.line[s.i]; c {
		case '"':
			s.i++
			return nil
		case '\\':
			if s.i+1 < len(s.line) && strings.IndexByte("$`\"\\\n", s.line[s.i+1]) >= 0 {
				if s.line[s.i+1] != '\n' {
					s.cur.WriteByte(s.line[s.i+1])
				}
				s.i += 2
			} else {
				s.cur.WriteByte('\\')
				s.i++
			}
		case '$', '`':
			return needsShell(s.line, fmt.Sprintf("%c inside double quotes (or escape it: \\%c)", c, c))
		default:
			s.cur.WriteByte(c)
			s.i++
		}
	}
}

// escape reads a backslash outside quotes, which takes the next byte as
// it is; a backslash and a line break join two lines.
func (s *splitter) escape() error {
	if s.i+1 >= len(s.line) {
		return fmt.Errorf("verify: split %s: it ends in a backslash, which escapes nothing: remove it", show(s.line))
	}
	if s.line[s.i+1] != '\n' {
		s.cur.WriteByte(s.line[s.i+1])
		s.inWord = true
	}
	s.i += 2
	return nil
}

func needsShell(line, what string) error {
	return fmt.Errorf(`verify: split %s: %w: set "verify": {"shell": true} in .snag/config.json, or write it without the unquoted %s`, show(line), ErrNeedsShell, what)
}

// show quotes a command for an error message, shortened when long.
func show(line string) string {
	const max = 80
	if len(line) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		return fmt.Sprintf("%q...", line[:cut])
	}
	return fmt.Sprintf("%q", line)
}

// RunCommand runs c and waits for it to end, or for its timeout, or for ctx.
//
// The command runs in c.Dir, in a process group of its own, with snagd's
// environment, stdin from /dev/null, and stdout and stderr captured together (the last
// [OutputKeep] bytes). When it runs out of time, or ctx ends, the whole
// group is killed (SIGKILL); when it exits, whatever it left running in its
// group is killed too, so a run leaves no process behind.
//
// A command that ran is a result, whatever its exit code: a non-zero exit is
// a failure to report, not an error. The error is for a command that could
// not start (a program not found, not executable, a missing folder: the
// message names the program and the fix) and for ctx ending, in which case
// the result says what the command did until then.
func RunCommand(ctx context.Context, c Command) (CommandResult, error) {
	var argv []string
	if c.Shell {
		if strings.TrimSpace(c.Line) == "" {
			return CommandResult{}, errors.New(`verify: the command is empty: write one in "verify": {"command": "..."}, or remove the key`)
		}
		argv = []string{"/bin/sh", "-c", c.Line}
	} else {
		var err error
		if argv, err = Split(c.Line); err != nil {
			return CommandResult{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return CommandResult{}, fmt.Errorf("verify: run %s: not started: %w", show(c.Line), err)
	}
	if c.Dir != "" {
		if fi, err := os.Stat(c.Dir); err != nil || !fi.IsDir() {
			return CommandResult{}, fmt.Errorf("verify: run %s: the folder %s to run it in is not there: check the project's root", show(c.Line), c.Dir)
		}
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.Dir
	cmd.SysProcAttr = procAttr()
	// One pipe for stdout and stderr, as an *os.File, so the command writes
	// straight into it and Wait does not wait for output copying: a
	// background process holding the pipe does not hold up the result.
	pr, pw, err := os.Pipe()
	if err != nil {
		return CommandResult{}, fmt.Errorf("verify: run %s: %w", show(c.Line), err)
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return CommandResult{}, startError(c, argv[0], err)
	}

	out := &tailBuffer{max: OutputKeep}
	copied := make(chan struct{})
	go func() {
		io.Copy(out, pr)
		close(copied)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	// The group's id is the leader's pid. Killing the group after the
	// leader was reaped is safe while any member is left (their group keeps
	// the number from being reused); with none left it finds nothing.
	pgid := cmd.Process.Pid
	kill := func() { syscall.Kill(-pgid, syscall.SIGKILL) }
	stop := func() {
		kill()
		cmd.Process.Kill() // should it have left its group
	}

	var timeout <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var res CommandResult
	var ctxErr error
	select {
	case <-waited:
	case <-timeout:
		res.TimedOut = true
		stop()
		<-waited
	case <-ctx.Done():
		ctxErr = ctx.Err()
		stop()
		<-waited
	}
	res.Took = time.Since(start)
	kill()
	select {
	case <-copied:
	case <-time.After(drainWait):
		pr.Close() // ends the copy
		<-copied
	}
	res.ExitCode = cmd.ProcessState.ExitCode()
	if res.TimedOut {
		res.ExitCode = -1
	}
	res.Tail = tail(out.bytes())
	res.Failing = failing(out.bytes())
	if ctxErr != nil {
		return res, fmt.Errorf("verify: run %s: stopped: %w", show(c.Line), ctxErr)
	}
	return res, nil
}

// startError explains why the program could not start, and what to do.
func startError(c Command, prog string, err error) error {
	where := "the command"
	if !c.Shell {
		where = "verify.command"
	}
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return fmt.Errorf("verify: run %s: program %q not found on snagd's PATH: install it, or fix %s (a program in the project needs a path: ./%s)", show(c.Line), prog, where, prog)
	case errors.Is(err, exec.ErrDot):
		return fmt.Errorf("verify: run %s: program %q is in the current folder, which snag does not search: write ./%s", show(c.Line), prog, prog)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("verify: run %s: program %q not found in %s: fix the path in %s", show(c.Line), prog, c.Dir, where)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("verify: run %s: program %q is not executable: chmod +x it, or name its interpreter (sh %s)", show(c.Line), prog, prog)
	}
	return fmt.Errorf("verify: run %s: %w", show(c.Line), err)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(p) >= b.max {
		b.buf = append(b.buf[:0], p[len(p)-b.max:]...)
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max { // compact now and then, not on every write
		n := copy(b.buf, b.buf[len(b.buf)-b.max:])
		b.buf = b.buf[:n]
	}
	return len(p), nil
}

func (b *tailBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf[max(0, len(b.buf)-b.max):]
}

// failurePattern matches a line that names a failure in the output of the
// usual test runners and compilers: go test (--- FAIL, FAIL, file.go:12:),
// pytest and unittest (FAILED, AssertionError, E   ...), jest and vitest
// (✕, ●, Expected/Received), mocha (failing, AssertionError), TAP (not ok),
// cargo (panicked at, test ... FAILED), and errors in general. It is
// compiled at its first use, not at the start of every program that links
// the package (snag's every command: 0.1 ms and 137 allocations).
var failurePattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(^\s*--- FAIL|^\s*FAIL\b|\bFAILED\b|^not ok\b|assert|expected|received|^\s*E\s{2,}|✕|✗|×|●|panicked at|^panic:|\berror\b|\w+_test\.go:\d+:)`)
})

// failing picks [CommandResult.Failing] from out.
func failing(out []byte) []string {
	var lines []string
	for line := range strings.Lines(strings.ToValidUTF8(string(out), "\uFFFD")) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" || !failurePattern().MatchString(line) {
			continue
		}
		if len(line) > FailingLineBytes {
			cut := FailingLineBytes
			for cut > 0 && !utf8.RuneStart(line[cut]) {
				cut--
			}
			line = line[:cut] + "…"
		}
		lines = append(lines, line)
		if len(lines) == FailingLines {
			break
		}
	}
	return lines
}

// tail is the end of out as [CommandResult.Tail] holds it.
func tail(out []byte) string {
	s := strings.ToValidUTF8(string(out), "\uFFFD")
	s = strings.TrimRight(s, "\r\n")
	lines := strings.Split(s, "\n")
	s = strings.Join(lines[max(0, len(lines)-TailLines):], "\n")
	if len(s) > TailBytes {
		s = s[len(s)-TailBytes:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	return s
}
