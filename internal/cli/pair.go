package cli

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/snagdev/snag/api"
)

func init() {
	register(&command{
		name: "pair", args: "[--list | --revoke] [--json]", daemon: true,
		summary: "Pair the snag browser extension with this project's snagd, or revoke its credentials.\n\n" +
			"snag pair prints snagd's address and a one-time code, as 127.0.0.1:7654 K7M-2QX: type\n" +
			"that line into the extension's popup (its toolbar button) within 5 minutes. The popup\n" +
			"trades it for a capture credential that creates captures in this project's inbox and\n" +
			"does nothing else; the extension never holds snagd's token. snagd keeps the credential's\n" +
			"hash only, in ~/.snag/capture-credentials.json (or $SNAG_HOME's).\n" +
			"--list shows the paired extensions; --revoke revokes every capture credential, of every\n" +
			"project, and the open codes: each extension must pair again.",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.Bool("list", false, "list the paired extensions")
			fs.Bool("revoke", false, "revoke every capture credential and open pairing code")
			fs.BoolVar(&c.opt.json, "json", false, "print JSON")
		},
		run: runPair,
	})
}

func runPair(ctx context.Context, c *call) error {
	on := func(name string) bool { return c.fs.Lookup(name).Value.String() == "true" }
	list, revoke := on("list"), on("revoke")
	switch {
	case len(c.args) > 0:
		return usagef("pair takes no arguments: snag pair [--list | --revoke]")
	case list && revoke:
		return usagef("pair: use --list or --revoke, not both")
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	switch {
	case revoke:
		out, err := r.cl.RevokeCaptureCredentials(ctx)
		if err != nil {
			return said(err)
		}
		if c.opt.json {
			return writeJSON(c.Stdout, out)
		}
		fmt.Fprintf(c.Stdout, "revoked %s and %s: every extension must pair again (snag pair)\n",
			plural(out.Revoked, "capture credential"), plural(out.Codes, "open pairing code"))
		return nil
	case list:
		out, err := r.cl.CaptureCredentials(ctx)
		if err != nil {
			return said(err)
		}
		if c.opt.json {
			return writeJSON(c.Stdout, out)
		}
		if len(out.Credentials) == 0 {
			fmt.Fprintln(c.Stdout, "no browser extension is paired: snag pair prints a code for one")
			return nil
		}
		tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ORIGIN\tPAIRED\tPROJECT")
		for _, cr := range out.Credentials {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", cr.Origin, cr.Paired.Local().Format("2006-01-02 15:04"), safeText(cr.Project))
		}
		return tw.Flush()
	}
	code, err := r.cl.PairingCode(ctx, api.MoveRequest{By: who()})
	if err != nil {
		return said(err)
	}
	if c.opt.json {
		return writeJSON(c.Stdout, code)
	}
	fmt.Fprintln(c.Stdout, code.Line)
	fmt.Fprintf(c.Stdout, "Type this line into the snag extension's popup before %s; it works once.\n",
		code.Expires.Local().Format(time.Kitchen))
	return nil
}
