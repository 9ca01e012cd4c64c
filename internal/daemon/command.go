package daemon

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/token"
)

// Command runs snagd as a command line: snagd [--root DIR] [--port N]
// [--log LEVEL] [--listen ADDR --tls-cert F --tls-key F
// [--allowed-host NAME]... [--hosted-token-file F]], or snagd --version,
// which prints "snagd" and version. The hosted token comes from
// --hosted-token-file, else from $SNAG_HOSTED_TOKEN. cmd/snagd and snag
// daemon both call it.
func Command(ctx context.Context, args []string, version string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("snagd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the project root: the folder that holds .snag/")
	port := fs.Int("port", envPort(), fmt.Sprintf("listen on 127.0.0.1:PORT (default: $SNAG_PORT, else the first free of %d-%d)", FirstPort, LastPort))
	level := fs.String("log", "info", "log level: debug, info, warn, error")
	idle := fs.Duration("exit-idle", 0, "stop after this long with no agent connected and no request (0: never)")
	mcpIdle := fs.Duration("mcp-idle", DefaultMCPIdle, "end an MCP session on /mcp whose client holds no GET stream after this long with no request")
	settle := fs.Duration("settle", DefaultSettle, "look again this long after a task file reads as missing or broken before believing it (editors truncate and rewrite in place)")
	mcpLost := fs.Duration("mcp-stream-grace", DefaultMCPStreamGrace, "end an MCP session on /mcp this long after its client's GET stream closed, unless a request comes")
	grace := fs.Duration("grace", DefaultGrace, "how long a session whose stream closed (its agent's bridge exited) keeps its leases, for a restart or a blip")
	handleIdle := fs.Duration("handle-idle", DefaultHandleIdle, "end an agent known only by its handle (MCP 2026-07-28 over /mcp) after this long with no call naming it; its leases go back")
	coordDSN := fs.String("coord", "", "coordinate with the other clones of the repository through this PostgreSQL DSN (default: $SNAG_COORD, else ~/.snag/coord; none: run alone)")
	coordGrace := fs.Duration("coord-grace", DefaultCoordGrace, "with --coord: how long a clone may stay silent before its agents' leases are given up")
	showVersion := fs.Bool("version", false, "print snagd's version and exit")
	var hosted Hosted
	fs.StringVar(&hosted.Listen, "listen", "", "also serve /mcp, and only /mcp, to agents on other machines on this HOST:PORT (TLS needed unless loopback)")
	fs.StringVar(&hosted.TLSCert, "tls-cert", "", "the hosted listener's PEM certificate (with --listen; TLS 1.2 or later)")
	fs.StringVar(&hosted.TLSKey, "tls-key", "", "the PEM private key of --tls-cert")
	fs.Func("allowed-host", "a Host name the hosted listener answers to, NAME or NAME:PORT; repeat for more (default: --listen's host, unless a wildcard)", func(s string) error {
		hosted.AllowedHosts = append(hosted.AllowedHosts, s)
		return nil
	})
	fs.StringVar(&hosted.TokenFile, "hosted-token-file", "", "a file of mode 0600 holding the hosted listener's token, at least 32 bytes, never snagd's own (default: $"+HostedTokenEnv+"); read again when it changes")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: snag daemon [--root DIR] [--port N] [--log LEVEL] [--exit-idle D] [--mcp-idle D] [--mcp-stream-grace D] [--settle D]\n"+
			"                   [--coord DSN] [--coord-grace D]\n"+
			"           [--listen ADDR [--tls-cert F --tls-key F] [--allowed-host NAME]... [--hosted-token-file F]]\n"+
			"   or: snagd with the same flags\n"+
			"   or: snagd --version\n\n"+
			"snagd watches a project's task files, keeps its index live, makes every write\n"+
			"and holds agents' leases. It listens on 127.0.0.1 only; with --listen it also\n"+
			"serves /mcp alone there, for agents on other machines, over TLS (plain HTTP on a\n"+
			"loopback ADDR only), to the --allowed-host names, with a token of its own:\n"+
			"  "+token.MakeCommand(HostedTokenHint)+"\n"+
			"  snagd --listen 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem \\\n"+
			"        --allowed-host snag.example.com --hosted-token-file "+HostedTokenHint+"\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if *showVersion {
		fmt.Fprintln(stdout, "snagd "+version)
		return nil
	}
	if v := os.Getenv(PortEnv); v != "" && envPort() <= 0 {
		return fmt.Errorf("%s=%q: want a port number, or unset it", PortEnv, v)
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("--port %d: want a port from 1 to 65535 (or 0 for the first free of %d-%d)", *port, FirstPort, LastPort)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("the daemon takes no arguments, only flags: snag daemon --help lists them")
	}
	var hostedOpts *Hosted
	if hosted.Listen != "" {
		hostedOpts = &hosted
		if hosted.TokenFile == "" {
			hosted.Token = os.Getenv(HostedTokenEnv)
		}
		// Processes snagd starts (verify commands, git, the browser)
		// never see it.
		os.Unsetenv(HostedTokenEnv)
	} else if hosted.TLSCert != "" || hosted.TLSKey != "" || hosted.TokenFile != "" || len(hosted.AllowedHosts) > 0 {
		return fmt.Errorf("--tls-cert, --tls-key, --allowed-host and --hosted-token-file configure the hosted /mcp: give --listen ADDR with them (snagd --help)")
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(*level))); err != nil {
		return fmt.Errorf("--log: want debug, info, warn or error")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(MemoryLimit)
	}
	if *coordGrace < time.Second {
		return fmt.Errorf("--coord-grace %v: want at least 1s (a clone heartbeats five times per grace, at most every %v)", *coordGrace, coord.DefaultHeartbeat)
	}
	return Run(ctx, Options{Root: *root, Port: *port, Version: version, Log: log, ExitIdle: *idle, Settle: *settle, MCPIdle: *mcpIdle, MCPStreamGrace: *mcpLost, HandleIdle: *handleIdle, Grace: *grace,
		Coord: *coordDSN, CoordGrace: *coordGrace,
		Hosted: hostedOpts,
		Ready:  func(addr string) { log.Info("ready", "addr", addr) }})
}

// MemoryLimit is the soft limit snagd sets on the Go runtime's memory
// unless GOMEMLIMIT is set: past it the collector runs sooner and gives
// memory back to the system, which keeps the heap of a start or a
// rescan at 100,000 tasks from doubling before a collection. SQLite's page
// caches are outside it.
const MemoryLimit = 80 << 20

// PortEnv names the variable that sets snagd's port when --port is not
// given, for a daemon the CLI starts in the background.
const PortEnv = "SNAG_PORT"

func envPort() int {
	p, err := strconv.Atoi(os.Getenv(PortEnv))
	if err != nil {
		return 0
	}
	return p
}
