// Package cli is the snag command line: every subcommand's flags, output and
// exit codes, behind one importable entry point, [Main], that cmd/snag and
// the end-to-end tests both call.
//
// Exit codes: 0 when all went well, 1 when a problem was found (an error, or
// snag doctor finding something), 2 for a usage mistake.
//
// cli wires the other packages together; nothing of snag's imports it.
package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/version"
)

// Env is what a command sees of the world around it.
type Env struct {
	Dir    string // the working directory
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Full is the part of snag only snagd's program links; nil in the snag
	// program, whose commands that need it run snagd's (see [Full]).
	Full Full
	// Interrupt, when set, gives a context that ends on SIGINT or SIGTERM
	// too: the snag program passes one that no signal ends, and this,
	// which a command calls only before it waits (for snagd to stop, for
	// a verify's outcome) to return cleanly when interrupted. Signal
	// handling starts a goroutine and a thread that a command answered
	// at once does without; such a command is ended by a signal as the
	// system ends a program.
	Interrupt func(context.Context) (context.Context, context.CancelFunc)
	// out is Stdout unbuffered, for commands that stream (mcp, daemon).
	out io.Writer
}

// Main runs the snag command line with args (without the program name) and
// returns the process's exit code. Errors are printed to env.Stderr.
//
// Stdout is buffered and flushed before anything is printed to Stderr and
// at the end, so a command's output is written in one go.
func Main(ctx context.Context, args []string, env Env) int {
	buf := bufio.NewWriterSize(env.Stdout, 32<<10)
	env.out, env.Stdout = env.Stdout, buf
	env.Stderr = flushFirst{buf, env.Stderr}
	err := Run(ctx, args, env)
	buf.Flush()
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.msg != "" {
			printError(env.Stderr, ee.msg)
		}
		return ee.code
	default:
		printError(env.Stderr, err.Error())
		return 1
	}
}

// interruptible gives ctx, ending on SIGINT or SIGTERM too, for a command
// about to wait (see Env.Interrupt); cancel releases it.
func (e Env) interruptible(ctx context.Context) (_ context.Context, cancel context.CancelFunc) {
	if e.Interrupt == nil {
		return ctx, func() {}
	}
	return e.Interrupt(ctx)
}

// flushFirst is stderr, written after what stdout holds in its buffer, so
// that the two come out in the order they were printed.
type flushFirst struct {
	out *bufio.Writer
	io.Writer
}

func (f flushFirst) Write(p []byte) (int, error) {
	f.out.Flush()
	return f.Writer.Write(p)
}

// printError prints each line of msg (several errors joined) as its own
// snag: line, with control characters escaped (an error may quote a file
// name or a title).
func printError(w io.Writer, msg string) {
	for _, line := range strings.Split(safeText(msg), "\n") {
		fmt.Fprintln(w, "snag: "+strings.TrimSuffix(line, "\r"))
	}
}

// exitError ends the process with a code, printing msg when it has one.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usagef reports a usage mistake (exit code 2).
func usagef(format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

// errFound ends a command that printed what it found with exit code 1.
var errFound = &exitError{code: 1}

type command struct {
	name    string
	args    string // the synopsis after the name
	summary string
	run     func(ctx context.Context, c *call) error
	flags   func(fs *flag.FlagSet, c *call)
	raw     bool // the command parses its own arguments (rawArgs)
	// daemon: the command talks to snagd, starting it when none answers,
	// and takes --no-autostart.
	daemon bool
}

// call is one invocation of a command: its flags, positional arguments and
// environment.
type call struct {
	Env
	cmd     *command
	argv    []string // the command line as typed, without the program
	fs      *flag.FlagSet
	args    []string
	rawArgs []string
	opt     options
}

// options holds every flag any command takes; each command registers the
// ones it uses.
type options struct {
	nested      bool // init: make a project inside another one's folder
	json        bool
	noAutostart bool
	title       string
	noFiles     bool
	follow      bool
	all         bool
	fix         bool
	status      string
	kind        string
	severity    string
	plan        string
	wave        int
	limit       int
	cursor      string
	body        string
	reason      string
	release     string
	task        string
	agent       string
	dryRun      bool
	wait        bool
	files       multi
	depends     multi
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// Run runs one snag command line.
func Run(ctx context.Context, args []string, env Env) error {
	if env.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		env.Dir = wd
	}
	if len(args) == 0 {
		printUsage(env.Stderr)
		return usagef("")
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help", "-help":
		if len(args) > 1 {
			c, ok := commands[args[1]]
			if !ok {
				return usagef("unknown command %q: snag help lists the commands", args[1])
			}
			cl := newCall(c, env)
			cl.fs.SetOutput(env.Stdout)
			cl.fs.Usage()
			return nil
		}
		printUsage(env.Stdout)
		return nil
	case "--version", "-version":
		args = append([]string{"version"}, args[1:]...)
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		return usagef("unknown command %q: snag help lists the commands", name)
	}
	cl := newCall(c, env)
	cl.argv = args
	if c.raw {
		cl.rawArgs = args[1:]
		return c.run(ctx, cl)
	}
	// A mistake in a flag is said in one line, below; help asked for is
	// the whole usage, on stdout.
	cl.fs.SetOutput(io.Discard)
	if slices.ContainsFunc(args[1:], func(a string) bool { return a == "-h" || a == "--help" || a == "-help" }) {
		cl.fs.SetOutput(env.Stdout)
	}
	pos, err := parseInterleaved(cl.fs, args[1:])
	cl.fs.SetOutput(env.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return usagef("%s: %s (snag help %s)", name, flagError(cl.fs, err), name)
	}
	cl.args = pos
	return c.run(ctx, cl)
}

func newCall(c *command, env Env) *call {
	cl := &call{Env: env, cmd: c}
	fs := flag.NewFlagSet("snag "+c.name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: snag %s %s\n\n%s\n", c.name, c.args, c.summary)
		var has bool
		fs.VisitAll(func(*flag.Flag) { has = true })
		if has {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	if c.flags != nil {
		c.flags(fs, cl)
	}
	if c.daemon {
		fs.BoolVar(&cl.opt.noAutostart, "no-autostart", false, "do not start snagd when none answers (also $"+NoAutostartEnv+"=1)")
	}
	cl.fs = fs
	return cl
}

// flagInvalid is how package flag words a value its flag cannot take,
// compiled at its first use rather than at every command's start.
var flagInvalid = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): `)
})

// flagError words err, from parsing fs, as a person reads it: the flag as
// they typed it, and what it takes.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("no flag --%s", name)
	}
	m := flagInvalid().FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want := "another value"
	if f := fs.Lookup(m[2]); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case int, int64, uint, uint64:
				want = "a whole number"
			case float64:
				want = "a number"
			case bool:
				want = "true or false"
			case time.Duration:
				want = "a duration, like 30s or 5m"
			}
		}
	}
	return fmt.Sprintf("--%s %q: want %s", m[2], m[1], want)
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, as people type them: snag add "Title" --kind ux.
// Everything after -- is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := args[:len(args)-len(rest)]
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `snag: a file-first task queue for coding agents and the people who direct them.

usage: snag <command> [arguments]

commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return commandOrder(names[i]) < commandOrder(names[j]) })
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, firstLine(commands[n].summary))
	}
	fmt.Fprint(w, `
snag help <command> shows a command's flags. Task references are aliases
like SNAG-12 (or just 12) or ids like tsk_01JD6Z3Q8R6V2X4N0H5K7M9P1C.
`)
}

var order = []string{"init", "add", "list", "show", "search", "edit", "dep", "ready", "done", "promote", "reject", "cancel", "reopen", "release", "resolve", "verify", "approve", "log", "agents", "files", "handoff", "plans", "notes", "note", "link", "graph", "activity", "team", "guard", "worktrees", "reindex", "doctor", "daemon", "open", "pair", "install", "mcp", "prime", "token", "version"}

func init() {
	register(&command{
		name: "version", args: "",
		summary: "Print snag's version (also snag --version).",
		run: func(ctx context.Context, c *call) error {
			if len(c.args) > 0 {
				return usagef("version takes no arguments")
			}
			fmt.Fprintln(c.Stdout, "snag "+version.String())
			return nil
		},
	})
}

func commandOrder(name string) int {
	for i, n := range order {
		if n == name {
			return i
		}
	}
	return len(order)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// who is the person at the keyboard, for the audit log.
func who() string {
	for _, k := range []string{"SNAG_USER", "USER", "USERNAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "person"
}
