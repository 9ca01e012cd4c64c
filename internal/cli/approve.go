package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/snagdev/snag/internal/approval"
	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/verify"
)

// hashShown is how many hex digits of an approval's hash snag shows.
const hashShown = 12

func init() {
	register(&command{
		name: "approve", args: "[SNAG-12 | --project] [--yes] | --check SNAG-12|--project | --list | --revoke HASH|SNAG-12|--project",
		summary: "Approve a verify command, so snagd may run it: a task's verify.command, or config.json's with --project.\n\n" +
			"A verify command comes from files a git pull can change, so snagd runs one only after a\n" +
			"person on this machine approved that exact command, for this project, with the shell on\n" +
			"or off as config.json says (verify.shell). A changed command needs approving again.\n" +
			"snag approve shows the command and asks first (--yes skips the question).\n" +
			"--check exits 0 when the current command is approved and 1 when it is not.\n" +
			"Approvals are per user, kept in ~/.snag/approved/ (or $SNAG_HOME/approved/).",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.Bool("project", false, "the project's verify.command in .snag/config.json rather than a task's")
			fs.Bool("yes", false, "approve without asking")
			fs.Bool("list", false, "list the approved commands")
			fs.Bool("revoke", false, "take back an approval: by hash (as --list shows it), by task, or --project")
			fs.Bool("check", false, "exit 0 when the command is approved, 1 when not")
			fs.BoolVar(&c.opt.json, "json", false, "with --list: print {\"approvals\": [...]} as JSON")
		},
		run: runApprove,
	})
}

// approveOptions are the flags of snag approve.
type approveOptions struct {
	project, yes, list, revoke, check bool
}

// approveFlags reads snag approve's flags back from the call's flag set:
// they are its own, not in [options].
func approveFlags(c *call) approveOptions {
	on := func(name string) bool {
		f := c.fs.Lookup(name)
		return f != nil && f.Value.String() == "true"
	}
	return approveOptions{project: on("project"), yes: on("yes"), list: on("list"), revoke: on("revoke"), check: on("check")}
}

func runApprove(ctx context.Context, c *call) error {
	o := approveFlags(c)
	modes := 0
	for _, on := range []bool{o.list, o.revoke, o.check} {
		if on {
			modes++
		}
	}
	switch {
	case modes > 1:
		return usagef("approve: use one of --list, --check and --revoke at a time")
	case c.opt.json && !o.list:
		return usagef("approve: --json goes with --list: snag approve --list --json")
	case o.list && (len(c.args) > 0 || o.project):
		return usagef("approve --list takes nothing else: snag approve --list")
	case !o.list && len(c.args) > 1:
		return usagef("approve takes one task: snag approve SNAG-12")
	case !o.list && o.project && len(c.args) > 0:
		return usagef("approve: name a task or --project, not both")
	case !o.list && !o.project && len(c.args) == 0:
		return usagef("approve: name the task whose verify command to approve (snag approve SNAG-12), or --project for config.json's")
	}
	store := approval.Open(filepath.Join(layout.Home(), approval.Folder))
	switch {
	case o.list:
		return listApprovals(c, store)
	case o.revoke && !o.project:
		// A hash prefix, or a task: what looks like both (1234) is tried
		// as a hash first.
		arg := c.args[0]
		_, refErr := queue.ParseRef(arg)
		hex := isHexPrefix(arg)
		if refErr != nil && !hex {
			return usagef("approve --revoke: %q is neither a hash (as snag approve --list shows it) nor a task (SNAG-12)", arg)
		}
		if hex {
			a, err := store.Revoke(arg)
			if err == nil {
				fmt.Fprintf(c.Stdout, "revoked %s: %s (in %s)\n", short(a.Hash), showCommand(a.Command), a.Scope)
				return nil
			}
			if refErr != nil || !errors.Is(err, approval.ErrNotFound) {
				return err
			}
		}
	}

	v, err := findVerify(c, o)
	if err != nil {
		return err
	}
	hash := approval.Hash(v.scope, v.command, v.shell)
	switch {
	case o.revoke:
		if _, err := store.Revoke(hash); errors.Is(err, approval.ErrNotFound) {
			return fmt.Errorf("%s's command is not approved; nothing to revoke (snag approve --list shows what is)", v.source)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(c.Stdout, "revoked %s: %s (in %s)\n", short(hash), showCommand(v.command), v.scope)
		return nil
	case o.check:
		ok, err := store.Approved(v.scope, v.command, v.shell)
		if ok {
			fmt.Fprintf(c.Stdout, "approved %s: %s\n", short(hash), showCommand(v.command))
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Stdout, "not approved: %s (snag approve %s shows it and approves it)\n", showCommand(v.command), v.arg)
		return errFound
	}

	v.describe(c.Stdout)
	if ok, _ := store.Approved(v.scope, v.command, v.shell); ok {
		fmt.Fprintf(c.Stdout, "already approved (%s): nothing to do\n", short(hash))
		return nil
	}
	if !o.yes {
		fmt.Fprint(c.Stderr, "approve this exact command? [y/N] ")
		answer, _ := bufio.NewReader(c.Stdin).ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "y", "yes":
		default:
			fmt.Fprintln(c.Stderr)
			return fmt.Errorf("not approved: answer y to approve it, or run snag approve %s --yes", v.arg)
		}
	}
	a, err := store.Approve(v.scope, v.command, v.shell)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "approved %s: snagd may run this command in %s, for any task or config.json that names it;\n", short(a.Hash), v.scope)
	fmt.Fprintf(c.Stdout, "snag approve --revoke %s takes it back\n", short(a.Hash))
	return nil
}

// verifyCommand is a verify command found in the project's files.
type verifyCommand struct {
	root    string // the project root
	scope   string // its approval scope
	source  string // where the command came from, as a person reads it
	file    string // the file it is in, relative to the root
	arg     string // how to name it to snag approve: SNAG-12 or --project
	command string
	shell   bool
	trust   queue.Trust // a task's trust tier; "" for config.json
}

// findVerify reads the verify command snag approve is about: the named
// task's, or config.json's with --project. It reads the files directly: no
// daemon needed.
func findVerify(c *call, o approveOptions) (*verifyCommand, error) {
	root, err := layout.Find(c.Dir)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(root, layout.Folder, layout.ConfigFile)
	cfg, err := queue.LoadConfig(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("%w (fix it in .snag/%s; docs/format.md lists the keys)", err, layout.ConfigFile)
	}
	scope, err := approvalScope(root)
	if err != nil {
		return nil, err
	}
	v := &verifyCommand{root: root, scope: scope, shell: cfg.Verify.Shell}
	if o.project {
		v.source, v.file, v.arg, v.command = "config.json", layout.Rel(layout.ConfigFile), "--project", cfg.Verify.Command
		if strings.TrimSpace(v.command) == "" {
			return nil, errors.New(`.snag/config.json has no verify.command: set "verify": {"command": "go test ./..."} there first`)
		}
	} else {
		ref, err := queue.ParseRef(c.args[0])
		if err != nil {
			return nil, err
		}
		t, name, err := readTask(root, ref)
		if err != nil {
			return nil, err
		}
		v.source, v.file, v.arg, v.trust = t.Key, layout.Rel(filepath.Join("tasks", name)), t.Key, t.Trust
		if t.Verify != nil {
			v.command = t.Verify.Command
		}
		if strings.TrimSpace(v.command) == "" {
			return nil, fmt.Errorf(`%s has no verify command of its own: add verify: {command: "go test ./..."} to the frontmatter of %s, or approve the project's with snag approve --project`, t.Key, v.file)
		}
	}
	if !v.shell {
		if _, err := verify.Split(v.command); err != nil {
			return nil, fmt.Errorf("%s's command cannot run as written, so there is nothing to approve yet: %w", v.source, err)
		}
	}
	return v, nil
}

// approvalScope is the scope an approval for the project at root is
// recorded under: the absolute, symlink-resolved root. snagd must compute
// it the same way: with [approval.Scope].
func approvalScope(root string) (string, error) {
	return approval.Scope(root)
}

// readTask reads the task ref names from .snag/tasks/, parsing the files.
func readTask(root string, ref queue.Ref) (*queue.Task, string, error) {
	d, err := taskfs.OpenDir(filepath.Join(root, layout.Folder, "tasks"))
	if err != nil {
		return nil, "", fmt.Errorf("%w: run snag init to create it", err)
	}
	defer d.Close()
	es, err := d.List()
	if err != nil {
		return nil, "", err
	}
	var bad error // a file named like the task that does not parse
	for _, e := range es {
		if e.Problem != nil {
			continue
		}
		raw, _, err := d.Read(e.Name)
		if err != nil {
			continue
		}
		t, err := codec.Parse(raw)
		if err != nil {
			if ref.Num > 0 && strings.HasPrefix(strings.ToUpper(e.Name), strings.ToUpper(ref.String())+" ") {
				bad = codec.WithPath(err, layout.Rel(filepath.Join("tasks", e.Name)))
			}
			continue
		}
		if ref.Matches(t) {
			return t, e.Name, nil
		}
	}
	if bad != nil {
		return nil, "", fmt.Errorf("%w (fix the file, then run snag approve again)", bad)
	}
	return nil, "", fmt.Errorf("no such task %s: snag list shows the tasks there are", ref)
}

// describe shows the command exactly, and where it came from.
func (v *verifyCommand) describe(w io.Writer) {
	how := "without a shell (split into words; verify.shell is off)"
	if v.shell {
		how = "through /bin/sh -c (verify.shell is on in .snag/config.json)"
	}
	from := v.file
	if v.trust != "" {
		from = v.source + " (" + v.file + ")"
	}
	fmt.Fprintf(w, "%s asks snagd to run, in %s, %s:\n\n", from, v.root, how)
	if shown, quoted := showVerbatim(v.command); quoted {
		fmt.Fprintf(w, "    %s\n\n(shown quoted: it holds characters a terminal would not show as they are)\n\n", shown)
	} else {
		for _, line := range strings.Split(v.command, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
		fmt.Fprintln(w)
	}
	if v.trust == queue.TrustUnvetted {
		fmt.Fprintf(w, "note: %s is unvetted: no person has vouched for it; read the command with care\n", v.source)
	}
}

// showVerbatim gives the command as it is when a terminal shows every
// character of it as it is, and Go-quoted otherwise: control characters,
// escape sequences, bidirectional and zero-width characters could make a
// terminal show a command other than the one approved.
func showVerbatim(s string) (string, bool) {
	for _, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) && r != ' ' {
			return strconv.Quote(s), true
		}
	}
	return s, false
}

// showCommand gives a command on one line, quoted when it needs to be.
func showCommand(s string) string {
	if shown, quoted := showVerbatim(s); quoted || strings.ContainsAny(s, "\n\t") {
		if quoted {
			return shown
		}
		return strconv.Quote(s)
	}
	return s
}

// isHexPrefix reports whether s could be the start of an approval's hash.
func isHexPrefix(s string) bool {
	return len(s) >= approval.MinPrefix && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

func short(hash string) string { return hash[:min(len(hash), hashShown)] }

// approvalJSON is one approval as snag approve --list --json prints it.
type approvalJSON struct {
	Hash    string    `json:"hash"`
	Scope   string    `json:"scope"`
	Command string    `json:"command"`
	Shell   bool      `json:"shell"`
	At      time.Time `json:"approved_at"`
	By      string    `json:"by"`
}

func listApprovals(c *call, store *approval.Store) error {
	list, err := store.List()
	if c.opt.json {
		out := make([]approvalJSON, 0, len(list))
		for _, a := range list {
			out = append(out, approvalJSON(a))
		}
		if werr := writeJSON(c.Stdout, map[string]any{"approvals": out}); werr != nil {
			return werr
		}
		return err
	}
	if len(list) == 0 && err == nil {
		fmt.Fprintln(c.Stdout, "no approved commands: snag approve SNAG-12 approves a task's verify command, snag approve --project config.json's")
		return nil
	}
	if len(list) > 0 {
		tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HASH\tAPPROVED\tBY\tSHELL\tSCOPE\tCOMMAND")
		for _, a := range list {
			sh := "no"
			if a.Shell {
				sh = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", short(a.Hash), a.At.UTC().Format("2006-01-02 15:04"), a.By, sh, a.Scope, showCommand(a.Command))
		}
		tw.Flush()
	}
	return err
}
