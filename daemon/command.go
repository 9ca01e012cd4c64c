package daemon

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Command runs snagd as a command line: snagd [--root DIR] [--port N]
// [--log LEVEL]. cmd/snagd and snag daemon both call it.
func Command(ctx context.Context, args []string, version string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("snagd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the project root: the folder that holds .snag/")
	port := fs.Int("port", 0, fmt.Sprintf("listen on 127.0.0.1:PORT (default: the first free of %d-%d)", FirstPort, LastPort))
	level := fs.String("log", "info", "log level: debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: snagd [--root DIR] [--port N] [--log LEVEL]\n\n"+
			"snagd watches a project's task files, keeps its index live, makes every write\n"+
			"and holds agents' leases. It listens on 127.0.0.1 only.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("snagd takes no arguments, only flags (snagd --help)")
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(*level))); err != nil {
		return fmt.Errorf("--log: want debug, info, warn or error")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	return Run(ctx, Options{Root: *root, Port: *port, Version: version, Log: log,
		Ready: func(addr string) { log.Info("ready", "addr", addr) }})
}
