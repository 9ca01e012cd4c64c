package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
)

func init() {
	register(&command{
		name: "open", args: "[--print]", daemon: true,
		summary: "Open the board, snagd's web page, in your browser.\n\n" +
			"snag asks snagd for a one-time login link (it works once, for 10 minutes) and opens it\n" +
			"with $BROWSER, xdg-open or open; when none works it prints the link. The browser keeps\n" +
			"a session cookie for the board until snagd stops.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.Bool("print", false, "only print the link")
		},
		run: runOpen,
	})
}

func runOpen(ctx context.Context, c *call) error {
	if len(c.args) > 0 {
		return usagef("open takes no arguments: snag open [--print]")
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	link, err := r.cl.LoginCode(ctx, api.MoveRequest{By: who()})
	if err != nil {
		return said(err)
	}
	if c.fs.Lookup("print").Value.String() == "true" {
		fmt.Fprintln(c.Stdout, link.URL)
		return nil
	}
	if err := openBrowser(ctx, link.URL); err != nil {
		fmt.Fprintf(c.Stderr, "snag: note: could not open a browser (%v): open this link, once, within 10 minutes:\n", err)
		fmt.Fprintln(c.Stdout, link.URL)
		return nil
	}
	fmt.Fprintln(c.Stdout, "opened the board in your browser")
	return nil
}

// openBrowser opens url with $BROWSER when it is set (a command, or several
// separated by colons, as other tools read it), else with the system's
// opener.
func openBrowser(ctx context.Context, url string) error {
	var tries [][]string
	for _, b := range strings.Split(os.Getenv("BROWSER"), string(os.PathListSeparator)) {
		if f := strings.Fields(b); len(f) > 0 {
			tries = append(tries, append(f, url))
		}
	}
	switch {
	case len(tries) > 0:
	case runtime.GOOS == "darwin":
		tries = append(tries, []string{"open", url})
	case runtime.GOOS == "windows":
		tries = append(tries, []string{"rundll32", "url.dll,FileProtocolHandler", url})
	default:
		tries = append(tries, []string{"xdg-open", url})
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	for _, t := range tries {
		cmd := exec.CommandContext(ctx, t[0], t[1:]...)
		if err = cmd.Run(); err == nil {
			return nil
		}
		err = fmt.Errorf("%s: %w", t[0], err)
	}
	return err
}
