package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snagdev/snag/gitdir"
	"github.com/snagdev/snag/layout"
	"github.com/snagdev/snag/queue"
)

func init() {
	register(&command{
		name: "team", args: "init [DSN] [--no-save | --save] | status [--json]",
		summary: "Turn team mode on, and see who is connected: clones on several machines share leases through PostgreSQL.\n\n" +
			"snag team init DSN creates snag's schema in the PostgreSQL database at DSN (or brings it up to\n" +
			"date), checks that snagd can connect, and saves the DSN in ~/.snag/coord (mode 0600), where\n" +
			"every snagd of this user finds it; --no-save leaves the file alone. With no DSN it uses\n" +
			"$SNAG_COORD or the saved file. A snagd that starts with a DSN joins its repository's clones.\n" +
			"snag team status lists the clones of this repository that are connected: their machine,\n" +
			"folder, branch, last heartbeat, agents and the tasks they hold.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.Bool("save", false, "init: save the DSN in ~/.snag/coord even when it came from $SNAG_COORD")
			fs.Bool("no-save", false, "init: do not save a DSN given on the command line")
			fs.BoolVar(&c.opt.json, "json", false, "status: print the status as JSON")
		},
		run: runTeam,
	})
}

// Coord is team mode's coordination store (package coord, on PostgreSQL)
// as snag team uses it. Only snagd's program links it (see [Full]).
type Coord interface {
	// FindDSN finds the DSN as snagd does without --coord: $SNAG_COORD,
	// else the file coord in home. It returns "" when neither gives one,
	// and says where the DSN came from.
	FindDSN(home string) (dsn, from string, err error)
	// SaveDSN writes dsn into the file coord in home, mode 0600, and
	// returns its path and, redacted, the other DSN it replaced ("" when
	// the file held none, or this one).
	SaveDSN(home, dsn string) (path, replaced string, err error)
	// Redact gives dsn with its password replaced by xxxxx.
	Redact(dsn string) string
	// Init creates or upgrades snag's schema in the database at dsn and
	// returns the versions it applied.
	Init(ctx context.Context, dsn string) ([]int, error)
	// Check connects as snagd does, without joining, and returns the
	// version of the schema.
	Check(ctx context.Context, dsn string) (int, error)
	// Status reads who is connected in workspace, without joining.
	Status(ctx context.Context, dsn, workspace string) (TeamStatus, error)
}

// TeamStatus is snag team status: the JSON of --json. Its fields are
// coord.TeamStatus's.
type TeamStatus struct {
	Workspace string      `json:"workspace"`
	Store     string      `json:"store"` // the DSN, its password redacted; "" when snag runs alone
	Schema    int         `json:"schema"`
	Clones    []TeamClone `json:"clones"`
	Held      int         `json:"held"`
	Done      int         `json:"done"`
	Note      string      `json:"note,omitempty"`
	Others    []string    `json:"other_workspaces,omitempty"`
}

// TeamClone is one snagd connected to the coordination store: coord.Clone.
type TeamClone struct {
	ID       int64     `json:"id"`
	Host     string    `json:"host"`
	Root     string    `json:"root"`
	Branch   string    `json:"branch,omitempty"`
	Version  string    `json:"version,omitempty"`
	Started  time.Time `json:"started"`
	Seen     time.Time `json:"seen"`
	Silent   float64   `json:"silent_sec"`
	Sessions []string  `json:"sessions,omitempty"`
	Held     int       `json:"held"`
	Ended    time.Time `json:"ended,omitzero"`
	Reason   string    `json:"reason,omitempty"`
}

// What snag team status says with no DSN set: two lines, or with --json
// one note.
const (
	aloneNote = "snag runs alone here: no coordination store is set ($SNAG_COORD, or ~/.snag/coord)"
	aloneHow  = "to share leases with clones on other machines: snag team init DSN (a PostgreSQL database),\n" +
		"then start snagd again in each clone (snag daemon stop; the next snag command starts it)"
)

func runTeam(ctx context.Context, c *call) error {
	if len(c.args) == 0 {
		c.fs.Usage()
		return usagef("")
	}
	on := func(name string) bool { return c.fs.Lookup(name).Value.String() == "true" }
	save, noSave := on("save"), on("no-save")
	switch sub := c.args[0]; {
	case sub == "init" && len(c.args) > 2:
		return usagef("team init takes one DSN: snag team init postgres://USER:PASSWORD@HOST:5432/DB")
	case sub == "init" && save && noSave:
		return usagef("team init: --save and --no-save contradict each other")
	case sub == "init" && c.opt.json:
		return usagef("team init: --json goes with status: snag team status --json")
	case sub == "status" && len(c.args) > 1:
		return usagef("team status takes no arguments: snag team status [--json]")
	case sub == "status" && (save || noSave):
		return usagef("team status: --save and --no-save go with init: snag team init DSN")
	case sub != "init" && sub != "status":
		return usagef("team: unknown subcommand %q (want init or status)", sub)
	}
	f, err := c.full()
	if err != nil {
		return err
	}
	ctx, cancel := c.interruptible(ctx)
	defer cancel()
	if c.args[0] == "init" {
		var dsn string
		if len(c.args) == 2 {
			dsn = c.args[1]
		}
		return teamInit(ctx, c, f.Coord(), dsn, save, noSave)
	}
	return teamStatus(ctx, c, f.Coord())
}

// fromArgs is where a DSN typed after snag team init came from.
const fromArgs = "the command line"

func teamInit(ctx context.Context, c *call, co Coord, dsn string, save, noSave bool) error {
	home := layout.Home()
	found, from, err := co.FindDSN(home)
	if err != nil && dsn == "" {
		return err
	}
	// With a DSN given, a saved file that FindDSN refuses (its mode, say)
	// is replaced by the save below.
	if dsn == "" {
		if found == "" {
			return usagef("team init needs a DSN: snag team init postgres://USER:PASSWORD@HOST:5432/DB (or set $SNAG_COORD)")
		}
		dsn = found
	} else {
		dsn = strings.TrimSpace(dsn)
		if found != "" && found != dsn && strings.HasPrefix(from, "$") {
			// snagd reads $SNAG_COORD before the file: saving this DSN
			// would not make snagd use it.
			fmt.Fprintf(c.Stderr, "snag: note: %s is set to another DSN (%s), and snagd uses it before ~/.snag/coord: unset it, or set it to this DSN\n",
				from, co.Redact(found))
		}
		from = fromArgs
	}
	shown := co.Redact(dsn)
	applied, err := co.Init(ctx, dsn)
	if err != nil {
		return fmt.Errorf("%w (the DSN came from %s)", err, from)
	}
	v, err := co.Check(ctx, dsn)
	if err != nil {
		return fmt.Errorf("%w (the DSN came from %s)", err, from)
	}
	if len(applied) == 0 {
		fmt.Fprintf(c.Stdout, "already at version %d: %s\n", v, safe(shown))
	} else {
		fmt.Fprintf(c.Stdout, "schema at version %d (applied %d): %s\n", v, len(applied), safe(shown))
	}
	w := c.Stdout
	env := strings.HasPrefix(from, "$")
	saved := ""
	switch {
	case from == fromArgs && noSave:
		fmt.Fprintln(w, "not saved (--no-save): a snagd finds the DSN only where $SNAG_COORD gives it")
	case from == fromArgs || env && save:
		p, replaced, err := co.SaveDSN(home, dsn)
		if err != nil {
			return err
		}
		saved = p
		if replaced != "" {
			fmt.Fprintf(w, "saved the DSN in %s (mode 0600), in place of %s: every snagd you start finds it there\n", p, replaced)
		} else {
			fmt.Fprintf(w, "saved the DSN in %s (mode 0600): every snagd you start finds it there\n", p)
		}
	case env:
		fmt.Fprintf(w, "the DSN came from %s: a snagd finds it when it starts where %s is set (--save keeps it in ~/.snag/coord for every one)\n", from, from)
	default:
		fmt.Fprintf(w, "the DSN came from %s, where every snagd you start finds it\n", from)
	}
	if from != fromArgs || !noSave {
		fmt.Fprintln(w, "restart snagd in each clone so that it joins (snag daemon stop; the next snag command starts it)")
		fmt.Fprintln(w, "then snag team status shows who is connected")
	}
	if from == fromArgs && strings.Contains(shown, "xxxxx") && !strings.Contains(dsn, "xxxxx") {
		// The DSN holds a password, which the shell's history and the
		// process list now hold too.
		how := "set $SNAG_COORD instead, or let snag team init save it in ~/.snag/coord"
		if saved != "" {
			how = "from now on snag and snagd read it from " + saved + " (snag team init with no DSN too)"
		}
		fmt.Fprintf(c.Stderr, "snag: note: a DSN typed on the command line stays in the shell's history and shows in ps: %s\n", how)
	}
	return nil
}

func teamStatus(ctx context.Context, c *call, co Coord) error {
	dsn, from, err := co.FindDSN(layout.Home())
	if err != nil {
		return err
	}
	if dsn == "" {
		st := TeamStatus{Clones: []TeamClone{}, Note: aloneNote + "; " + strings.ReplaceAll(aloneHow, ",\n", ", ")}
		if root, err := layout.Find(c.Dir); err == nil {
			st.Workspace, _ = workspaceOf(root)
		}
		if c.opt.json {
			return writeJSON(c.Stdout, st)
		}
		fmt.Fprintln(c.Stdout, aloneNote)
		fmt.Fprintln(c.Stdout, aloneHow)
		return nil
	}
	r, err := running(ctx, c)
	if err != nil {
		return err
	}
	ws, err := workspaceOf(r.root)
	if err != nil {
		return err
	}
	st, err := co.Status(ctx, dsn, ws)
	if err != nil {
		return fmt.Errorf("%w (the DSN came from %s)", err, from)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, st)
	}
	w := c.Stdout
	fmt.Fprintf(w, "team mode: %s (from %s), schema version %d\n", safe(st.Store), safe(from), st.Schema)
	if len(st.Clones) == 0 {
		fmt.Fprintln(w, safe(st.Note))
		if len(st.Others) > 0 {
			fmt.Fprintf(w, "the store holds these workspaces: %s (config.json's workspace names the one this clone joins)\n",
				safe(strings.Join(st.Others, ", ")))
		}
	} else {
		fmt.Fprintf(w, "%s: %s connected, %s held, %d done\n", safe(st.Workspace),
			plural(len(st.Clones), "clone"), plural(st.Held, "task"), st.Done)
	}
	width := 0
	for _, cl := range st.Clones {
		width = max(width, len(cl.Host))
	}
	for _, cl := range st.Clones {
		branch := cl.Branch
		if branch == "" {
			branch = "-"
		}
		agents := "no agent"
		if len(cl.Sessions) > 0 {
			agents = "agents " + strings.Join(cl.Sessions, ", ")
		}
		fmt.Fprintf(w, "%-*s %s on %s, heartbeat %s ago, %s, holding %s\n", width, safe(cl.Host), safe(cl.Root), safe(branch),
			shortAgo(time.Duration(cl.Silent*float64(time.Second))), safe(agents), plural(cl.Held, "task"))
	}
	if r.cl == nil {
		fmt.Fprintf(w, "no snagd serves %s: the next snag command starts one, which joins\n", r.root)
		return nil
	}
	h := r.cl.Health()
	host, _ := os.Hostname()
	for _, cl := range st.Clones {
		if cl.Host == host && samePath(cl.Root, h.Root) {
			return nil
		}
	}
	fmt.Fprintf(w, "the snagd serving here (pid %d) is not connected: it started before team mode was on, or cannot reach the store "+
		"(.snag/snagd.log says which): snag daemon stop, and the next snag command starts it again\n", h.PID)
	return nil
}

// workspaceOf names the workspace of the project at root, as snagd does.
func workspaceOf(root string) (string, error) {
	cfg, err := queue.LoadConfig(filepath.Join(root, layout.Folder, layout.ConfigFile))
	if err != nil {
		return "", fmt.Errorf("%w (fix it in .snag/%s: it names the workspace the clones share)", err, layout.ConfigFile)
	}
	return gitdir.Workspace(root, cfg.Workspace), nil
}

// samePath reports whether a and b name one folder.
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// plural is n and noun, with an s when n is not 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
