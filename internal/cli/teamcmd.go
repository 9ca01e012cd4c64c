package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/queue"
)

func init() {
	register(&command{
		name: "team", args: "init [DSN] [--no-save | --save] | status [--json] | leave",
		summary: "Turn team mode on for this repository, and see who is connected: clones on several machines share leases through PostgreSQL.\n\n" +
			"snag team init DSN creates snag's schema in the PostgreSQL database at DSN (or brings it up to\n" +
			"date), checks that snagd can connect, and saves the DSN in this repository's .git/snag/coord\n" +
			"(mode 0600), where its snagd finds it: this repository joins, your other projects stay alone;\n" +
			"--no-save leaves the file alone. With no DSN it uses $SNAG_COORD or the saved file. A snagd\n" +
			"that starts with a DSN joins its repository's clones. snag team leave removes the saved DSN:\n" +
			"the repository runs alone from its snagd's next start. snag team status lists the clones of\n" +
			"this repository that are connected: their machine, folder, branch, last heartbeat, agents\n" +
			"and the tasks they hold.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.Bool("save", false, "init: save the DSN in the repository's .git/snag/coord even when it came from $SNAG_COORD")
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
	// else the file coord in state, the repository's state folder. It
	// returns "" when neither gives one, and says where the DSN came from.
	FindDSN(state string) (dsn, from string, err error)
	// SaveDSN writes dsn into the file coord in state, mode 0600, and
	// returns its path and, redacted, the other DSN it replaced ("" when
	// the file held none, or this one).
	SaveDSN(state, dsn string) (path, replaced string, err error)
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
	Grace    float64   `json:"grace_sec,omitempty"`
	Ended    time.Time `json:"ended,omitzero"`
	Reason   string    `json:"reason,omitempty"`
}

// What snag team status says with no DSN set: two lines, or with --json
// one note.
const (
	aloneNote = "snag runs alone here: no coordination store is set ($SNAG_COORD, or the repo's .git/snag/coord)"
	aloneHow  = "to share leases with clones on other machines: snag team init DSN (a PostgreSQL database) in this\n" +
		"repository, then start snagd again in each clone (snag daemon stop; the next snag command starts it)"
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
	case sub == "leave" && (len(c.args) > 1 || save || noSave || c.opt.json):
		return usagef("team leave takes nothing: snag team leave")
	case sub != "init" && sub != "status" && sub != "leave":
		return usagef("team: unknown subcommand %q (want init, status or leave)", sub)
	}
	if sub := c.args[0]; sub == "leave" {
		return teamLeave(c)
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

// teamState is the folder of the repository snag team runs in that holds
// its saved DSN (gitdir.State: .git/snag, or .snag outside git).
func teamState(c *call) (root, state string, err error) {
	root, err = layout.Find(c.Dir)
	if err != nil {
		return "", "", fmt.Errorf("snag team works on the repository it runs in: %w", err)
	}
	return root, gitdir.State(root), nil
}

// legacyNote is what snag team says of the per-user DSN file of older
// versions, when it is there, or "".
func legacyNote() string {
	p := filepath.Join(layout.Home(), "coord")
	if _, err := os.Lstat(p); err != nil {
		return ""
	}
	return "snag: note: " + p + " is no longer read (it made every project of yours join): snag team init in each repository that should join, then remove it"
}

func teamLeave(c *call) error {
	_, state, err := teamState(c)
	if err != nil {
		return err
	}
	p := filepath.Join(state, "coord")
	switch err := os.Remove(p); {
	case err == nil:
		fmt.Fprintf(c.Stdout, "left team mode: removed %s; this repository's snagd runs alone from its next start (snag daemon stop; the next snag command starts it)\n", p)
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(c.Stdout, "this repository saved no DSN (%s): nothing to leave\n", p)
	default:
		return fmt.Errorf("team leave: %w: check that %s can be written", err, state)
	}
	if os.Getenv("SNAG_COORD") != "" {
		fmt.Fprintln(c.Stderr, "snag: note: $SNAG_COORD is set: a snagd started where it is set still joins: unset it")
	}
	return nil
}

func teamInit(ctx context.Context, c *call, co Coord, dsn string, save, noSave bool) error {
	root, home, err := teamState(c)
	if err != nil {
		return err
	}
	cfg, err := queue.LoadConfig(filepath.Join(root, layout.Folder, layout.ConfigFile))
	if err != nil {
		return fmt.Errorf("%w (fix it in .snag/%s: it names the workspace the clones share)", err, layout.ConfigFile)
	}
	named := strings.TrimSpace(cfg.Workspace) != ""
	if common := gitdir.Common(root); common != "" && gitdir.RemoteName(gitdir.Origin(common)) != "" {
		named = true
	}
	if note := legacyNote(); note != "" {
		fmt.Fprintln(c.Stderr, note)
	}
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
			fmt.Fprintf(c.Stderr, "snag: note: %s is set to another DSN (%s), and snagd uses it before the saved one: unset it, or set it to this DSN\n",
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
	if !named {
		// A workspace named after the folder would join unrelated projects
		// that share a folder name.
		return fmt.Errorf("team init: this repository has no origin remote, so its clones have no name in common: " +
			"set \"workspace\" in .snag/config.json (the same in every clone, for example \"acme/shop\") and commit it, then snag team init again (nothing was saved)")
	}
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
			fmt.Fprintf(w, "saved the DSN in %s (mode 0600), in place of %s: this repository's snagd finds it there\n", p, replaced)
		} else {
			fmt.Fprintf(w, "saved the DSN in %s (mode 0600): this repository's snagd finds it there\n", p)
		}
	case env:
		fmt.Fprintf(w, "the DSN came from %s: a snagd finds it when it starts where %s is set (--save keeps it in this repository's .git/snag/coord)\n", from, from)
	default:
		fmt.Fprintf(w, "the DSN came from %s, where this repository's snagd finds it\n", from)
	}
	if from != fromArgs || !noSave {
		fmt.Fprintln(w, "restart snagd in each clone so that it joins (snag daemon stop; the next snag command starts it)")
		fmt.Fprintln(w, "then snag team status shows who is connected")
	}
	if from == fromArgs && strings.Contains(shown, "xxxxx") && !strings.Contains(dsn, "xxxxx") {
		// The DSN holds a password, which the shell's history and the
		// process list now hold too.
		how := "set $SNAG_COORD instead, or let snag team init save it in the repository's .git/snag/coord"
		if saved != "" {
			how = "from now on snag and snagd read it from " + saved + " (snag team init with no DSN too)"
		}
		fmt.Fprintf(c.Stderr, "snag: note: a DSN typed on the command line stays in the shell's history and shows in ps: %s\n", how)
	}
	return nil
}

func teamStatus(ctx context.Context, c *call, co Coord) error {
	_, state, err := teamState(c)
	if err != nil {
		return err
	}
	dsn, from, err := co.FindDSN(state)
	if err != nil {
		return err
	}
	if note := legacyNote(); note != "" && !c.opt.json {
		fmt.Fprintln(c.Stderr, note)
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
	graces := map[float64]bool{}
	for _, cl := range st.Clones {
		graces[cl.Grace] = true
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
	if len(graces) > 1 {
		var gs []string
		for _, cl := range st.Clones {
			g := "default (older snagd)"
			if cl.Grace > 0 {
				g = fmt.Sprintf("%g s", cl.Grace)
			}
			gs = append(gs, safe(cl.Host)+" "+g)
		}
		fmt.Fprintf(w, "the clones run with different graces (%s): each is swept by its own, but a --coord-grace set on one clone is likely meant for all\n",
			strings.Join(gs, ", "))
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
