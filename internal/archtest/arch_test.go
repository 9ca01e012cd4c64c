package archtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/snagdev/snag"

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Doc        string
	Deps       []string
	Imports    []string
	Name       string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// forbidden says, per package, which import path prefixes its dependency
// closure must not contain.
var forbidden = map[string][]string{
	"internal/queue": {module + "/", "zombiezen.com/", "modernc.org/", "github.com/fsnotify/", "github.com/modelcontextprotocol/", "net/http"},
	"internal/codec": {module + "/", "zombiezen.com/", "modernc.org/", "github.com/fsnotify/", "github.com/modelcontextprotocol/", "net/http"},
	// The index returns the domain's values (internal/snag), never the
	// wire's: api is snagd's face, not the store's.
	"internal/index": {module + "/api", module + "/internal/project", module + "/internal/cli", module + "/internal/watch", module + "/internal/mcp", "github.com/fsnotify/", "github.com/modelcontextprotocol/", "net/http"},
	"internal/watch": {module + "/internal/index", module + "/internal/project", module + "/internal/cli", module + "/internal/mcp", "zombiezen.com/", "modernc.org/", "github.com/modelcontextprotocol/"},
	// mcp speaks the operations' types (internal/ops) over the domain's
	// values (internal/snag) to a backend it declares: never the wire's,
	// which is one of its backends' transports.
	"internal/mcp": {module + "/api", module + "/internal/index", module + "/internal/project", module + "/internal/cli", module + "/internal/watch", "zombiezen.com/", "modernc.org/", "github.com/fsnotify/"},
	"client":       {module + "/internal/index", module + "/internal/project", module + "/internal/daemon", module + "/internal/cli", "zombiezen.com/", "modernc.org/", "github.com/fsnotify/", "net/http", "crypto/tls"},
	// The bridge's link runs snagd's operations through the client (so
	// in the operations' types), never the index.
	"internal/mcp/remote": {module + "/internal/index", module + "/internal/project", module + "/internal/daemon", module + "/internal/cli", module + "/internal/watch", "zombiezen.com/", "modernc.org/", "github.com/fsnotify/"},
	// atomicfile is the leaf under every small file snag replaces;
	// version the one every command and snagd ask which build runs.
	"internal/atomicfile": {module + "/"},
	"internal/version":    {module + "/"},
	// The failpoints, in the build without their tag (the one people run).
	"internal/failpoint": {module + "/"},
	// The tests' harness runs snag as processes; importing any package of
	// snag's would cycle with that package's own tests.
	"internal/snagdtest": {module + "/"},
	// snag, the command a person runs all day, starts in milliseconds: it
	// links the client side alone, never snagd, SQLite, the MCP SDK,
	// chromedp or the file watcher. The commands that need those run
	// snagd's program (cli.Full, package cli/full).
	"cmd/snag":     lean,
	"internal/cli": lean,
	// Where a project lives on disk, for the lean command line and project.
	"internal/layout":   {module + "/"},
	"internal/token":    {module + "/"},
	"internal/gitdir":   {module + "/"},
	"internal/repopath": {module + "/"},
	"internal/proc":     {module + "/"},
	// The verifiers and the approvals are leaves: snagd and the CLI use
	// them, they use nothing of snag's.
	"internal/approval": {module + "/"},
	"internal/verify":   {module + "/"},
	// The coordination store imports nothing of snag's but the domain's
	// values (internal/snag, a leaf), and uses none of those yet: its rows
	// are the store's, across clones, and the engine maps them.
	"internal/coord": {module + "/"},
	// The image comparison is a leaf of the standard library's.
	"internal/pixdiff": {module + "/"},
	"internal/browser": {module + "/", "net/http"},
	// The board serves its pages over the Backend it declares, in the
	// API's types: nothing of how snagd stores the tasks or writes them.
	"internal/board": {module + "/", "zombiezen.com/", "modernc.org/", "github.com/fsnotify/", "github.com/modelcontextprotocol/"},
	"api":            {module + "/", "net/http"},
	// The domain's values are a leaf over the task file's types; the
	// operations' requests and answers are built of them. Neither knows
	// a transport or a store.
	"internal/snag": {module + "/", "net/http", "zombiezen.com/", "modernc.org/", "github.com/jackc/"},
	"internal/ops":  {module + "/", "net/http", "zombiezen.com/", "modernc.org/", "github.com/jackc/"},
	// The one writer knows the domain, the index and the project's files;
	// nothing of how it is served, and nothing of the services that run
	// beside it (internal/engine/*: they use it over their seams, and the
	// workspace wires them). A service is held to the same, siblings
	// included (see servicesOf).
	"internal/engine":    {module + "/internal/daemon", module + "/internal/cli", module + "/client", module + "/internal/mcp", module + "/internal/board", "net/http", module + "/internal/engine/", module + "/internal/workspace"},
	"internal/workspace": {module + "/internal/daemon", module + "/internal/cli", module + "/client", module + "/internal/mcp", module + "/internal/board", "net/http"},
	"internal/project":   {module + "/internal/cli", module + "/internal/watch", module + "/internal/mcp", "github.com/fsnotify/", "github.com/modelcontextprotocol/", "net/http"},
}

// lean is what snag's own program must not link: every linked package's
// init runs on every command, and its pages are faulted in.
var lean = []string{
	module + "/internal/daemon", module + "/internal/engine", module + "/internal/index", module + "/internal/project", module + "/internal/watch",
	module + "/internal/mcp", module + "/internal/board", module + "/internal/browser", module + "/internal/cli/full",
	"zombiezen.com/", "modernc.org/", "github.com/modelcontextprotocol/", "github.com/chromedp/", "github.com/fsnotify/",
	// The coordination store's driver: snag team runs snagd's program.
	module + "/internal/coord", "github.com/jackc/",
	// A loopback request to our own daemon needs no HTTP/2, TLS, x509 or
	// gzip (client/wire.go).
	"net/http", "crypto/tls", "crypto/x509", "compress/",
}

// allowed names, per package, the packages of snag's its forbidden list
// would catch but that it may use: the leaves under it.
var allowed = map[string][]string{
	"internal/token":    {module + "/internal/atomicfile"},
	"internal/approval": {module + "/internal/atomicfile"},
	"internal/browser":  {module + "/internal/atomicfile"},
	// The wire contract is plain types over the domain: nothing of how
	// snagd stores or serves them. It names the domain's values and the
	// operations' types through aliases.
	"api":            {module + "/internal/queue", module + "/internal/snag", module + "/internal/ops"},
	"internal/snag":  {module + "/internal/queue"},
	"internal/coord": {module + "/internal/snag", module + "/internal/queue"},
	"internal/ops":   {module + "/internal/queue", module + "/internal/snag"},
	// The board: the domain and the wire contract, for their types (the
	// wire's aliases bring in the packages they name).
	"internal/board":  {module + "/internal/queue", module + "/api", module + "/internal/snag", module + "/internal/ops", module + "/internal/graphdraw"},
	"internal/layout": {module + "/internal/queue", module + "/internal/taskfs"},
	// The file store: the domain's names, nothing of the index or snagd.
	"internal/taskfs": {module + "/internal/queue"},
	// The codec: bytes over the domain's types, and no I/O.
	"internal/codec": {module + "/internal/queue"},
}

func TestDependenciesPointInward(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		bans, ok := forbidden[rel]
		if !ok && strings.HasPrefix(rel, "internal/engine/") {
			bans, ok = forbidden["internal/engine"], true // a service of the engine's
		}
		if !ok {
			continue
		}
		for _, d := range p.Deps {
			for _, ban := range bans {
				if banned(d, ban) && d != p.ImportPath && !slices.Contains(allowed[rel], d) {
					t.Errorf("%s depends on %s; %s must not depend on anything under %s", rel, d, rel, ban)
				}
			}
		}
	}
}

// banned reports whether the import path dep falls under ban: a ban that
// ends in "/" is a prefix (every module of a host, say); any other is a
// package and its subpackages, so ".../cli" does not catch ".../client".
func banned(dep, ban string) bool {
	if strings.HasSuffix(ban, "/") {
		return strings.HasPrefix(dep, ban)
	}
	return dep == ban || strings.HasPrefix(dep, ban+"/")
}

// TestOnlyTestsImportSnagdtest keeps the tests' harnesses (snagd's, the
// PostgreSQL cluster's, team mode's) out of every binary: only _test.go
// files, and the harnesses themselves, may import them.
func TestOnlyTestsImportSnagdtest(t *testing.T) {
	harnesses := []string{module + "/internal/snagdtest", module + "/internal/pgtest", module + "/internal/pgtest/teamstore", module + "/internal/workspace/workspacetest"}
	for _, p := range listPackages(t) {
		for _, h := range harnesses {
			if slices.Contains(p.Imports, h) && !slices.Contains(harnesses, p.ImportPath) {
				t.Errorf("%s imports %s outside its tests: only _test.go files may", p.ImportPath, strings.TrimPrefix(h, module+"/"))
			}
		}
	}
}

// TestOnlyMainsImportCLI: cmd/* run the command line; cli/full is the
// part of it that only snagd's program links.
func TestOnlyMainsImportCLI(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if imp == module+"/internal/cli" && p.Name != "main" && p.ImportPath != module+"/internal/cli/full" {
				t.Errorf("%s imports cli: only cmd/* and cli/full may", p.ImportPath)
			}
		}
	}
}

// TestOnlyMainsAndCLIImportDaemon keeps snagd's wiring at the top: the
// mains run it, and cli/full runs it for snag daemon; every other package
// reaches the one writer through engine, or snagd through client.
func TestOnlyMainsAndCLIImportDaemon(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if imp == module+"/internal/daemon" && p.Name != "main" && p.ImportPath != module+"/internal/cli/full" {
				t.Errorf("%s imports daemon: only cmd/* and cli/full (snag daemon) may", p.ImportPath)
			}
		}
	}
}

func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range listPackages(t) {
		want := "Package " + p.Name + " "
		if p.Name == "main" {
			want = "Command "
		}
		if !strings.HasPrefix(p.Doc, want) {
			t.Errorf("%s: package comment should start %q; got %q", p.ImportPath, want, p.Doc)
		}
	}
}

func TestBanned(t *testing.T) {
	for _, c := range []struct {
		dep, ban string
		want     bool
	}{
		{module + "/internal/cli", module + "/internal/cli", true},
		{module + "/internal/cli/sub", module + "/internal/cli", true},
		{module + "/client", module + "/internal/cli", false},
		{"zombiezen.com/go/sqlite", "zombiezen.com/", true},
		{"net/http/httptest", "net/http", true},
		{"net/httpx", "net/http", false},
	} {
		if got := banned(c.dep, c.ban); got != c.want {
			t.Errorf("banned(%q, %q) = %v, want %v", c.dep, c.ban, got, c.want)
		}
	}
}

// TestFailpointsNeedTheTag keeps the crash tests' failpoints out of the
// binaries people run: without -tags failpoints, internal/failpoint is its
// no-op half, so SNAG_FAILPOINT does nothing in make build's snagd.
func TestFailpointsNeedTheTag(t *testing.T) {
	files := func(tags ...string) string {
		t.Helper()
		args := append([]string{"list"}, tags...)
		out, err := exec.Command("go", append(args, "-f", "{{join .GoFiles \" \"}}", module+"/internal/failpoint")...).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", strings.Join(tags, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	if got, want := files(), "failpoint.go off.go"; got != want {
		t.Errorf("internal/failpoint without the tag compiles %q, want %q", got, want)
	}
	if got, want := files("-tags", "failpoints"), "failpoint.go on.go"; got != want {
		t.Errorf("internal/failpoint with -tags failpoints compiles %q, want %q", got, want)
	}
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/snagd").Output()
	if err != nil {
		t.Fatalf("go list -deps cmd/snagd: %v", err)
	}
	if !strings.Contains(string(out), module+"/internal/failpoint\n") {
		t.Errorf("cmd/snagd does not depend on internal/failpoint: this test checks nothing")
	}
}

// maxFileLines bounds a source file: past it, a file holds more than one
// thing, and its name says only one of them.
const maxFileLines = 700

// TestSourceFilesStaySmall keeps every source file (tests aside) within
// maxFileLines: split a file that grows past it by what it holds.
func TestSourceFilesStaySmall(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, f := range p.GoFiles {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
				t.Errorf("%s/%s has %d lines, over %d: split it by what it holds, each part in a file named for it", p.ImportPath, f, n, maxFileLines)
			}
		}
	}
}
