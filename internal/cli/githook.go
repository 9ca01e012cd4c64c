package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// hookMarker names the pre-commit hook snag install git-hook writes.
const hookMarker = "# snag guard (snag install git-hook)"

// chainedHook is where a pre-commit hook already there goes: snag's hook
// runs it first.
const chainedHook = "pre-commit.snag-chained"

// guardHook is the pre-commit hook: the hook that was there before, then
// snag guard, with snag from PATH or where snag install found it.
func guardHook(exe string) string {
	return "#!/bin/sh\n" + hookMarker + ": a commit touching files another live agent\n" +
		"# claims is refused; git commit --no-verify skips this hook.\n" +
		"dir=$(dirname \"$0\")\n" +
		"if [ -x \"$dir/" + chainedHook + "\" ]; then\n" +
		"\t\"$dir/" + chainedHook + "\" \"$@\" || exit $?\n" +
		"fi\n" +
		"snag=$(command -v snag || true)\n" +
		"[ -n \"$snag\" ] || snag=" + shellQuote(exe) + "\n" +
		"if [ ! -x \"$snag\" ]; then\n" +
		"\techo \"snag guard: snag is not on PATH: this commit was not checked against file claims\" >&2\n" +
		"\texit 0\n" +
		"fi\n" +
		"exec \"$snag\" guard\n"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// installGitHook writes the pre-commit hook into the repository's hooks
// folder (git rev-parse --git-path hooks: core.hooksPath, and the folder
// every worktree shares), moving a hook already there aside to run first.
func installGitHook(ctx context.Context, c *call) error {
	out, err := c.git(ctx, "rev-parse", "--git-path", "hooks")
	if err != nil {
		return fmt.Errorf("install git-hook: %w (run it inside the project's git repository)", err)
	}
	dir := strings.TrimSpace(out)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(c.Dir, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install git-hook: %w", err)
	}
	exe, _ := os.Executable()
	hook := filepath.Join(dir, "pre-commit")
	old, err := os.ReadFile(hook)
	switch {
	case err == nil && bytes.Contains(old, []byte(hookMarker)):
		if string(old) == guardHook(exe) {
			fmt.Fprintf(c.Stdout, "the snag guard pre-commit hook is already installed in %s: nothing changed\n", dir)
			return nil
		}
	case err == nil:
		chained := filepath.Join(dir, chainedHook)
		if _, err := os.Stat(chained); err == nil {
			return fmt.Errorf("install git-hook: %s and %s both exist: merge them by hand, remove %s, and run it again",
				hook, chained, chained)
		}
		if err := os.Rename(hook, chained); err != nil {
			return fmt.Errorf("install git-hook: %w", err)
		}
		fmt.Fprintf(c.Stdout, "moved the pre-commit hook that was there to %s: it runs first\n", chained)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("install git-hook: %w", err)
	}
	if err := writeAtomic(hook, []byte(guardHook(exe))); err != nil {
		return fmt.Errorf("install git-hook: %w", err)
	}
	if err := os.Chmod(hook, 0o755); err != nil {
		return fmt.Errorf("install git-hook: %w", err)
	}
	fmt.Fprintf(c.Stdout, "installed %s: a commit touching files another live agent claims is refused (git commit --no-verify skips it)\n", hook)
	return nil
}
