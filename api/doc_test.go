package api_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/snagdev/snag/api"
)

var update = flag.Bool("update", false, "rewrite docs/api.md from the api package")

const reference = "../docs/api.md"

// TestReferenceIsCurrent checks docs/api.md against what the api package
// says: its route table, its types with their fields and doc comments, and
// its error codes. go test ./api -update rewrites the file.
func TestReferenceIsCurrent(t *testing.T) {
	got := generate(t)
	if *update {
		if err := os.WriteFile(reference, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(reference)
	if err != nil {
		t.Fatalf("%v: run go test ./api -update to write it", err)
	}
	if string(want) != got {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		for i := range max(len(wl), len(gl)) {
			var w, g string
			if i < len(wl) {
				w = wl[i]
			}
			if i < len(gl) {
				g = gl[i]
			}
			if w != g {
				t.Fatalf("docs/api.md is not what the api package says (first difference at line %d):\n-%s\n+%s\nrun go test ./api -update and commit the file", i+1, w, g)
			}
		}
	}
}

// sources are the packages whose source the reference is read from: the
// api package, and the two whose types it names through aliases (the
// domain's values and the operations' requests and answers).
var sources = map[string]string{
	".":                "github.com/snagdev/snag/api",
	"../internal/snag": "github.com/snagdev/snag/internal/snag",
	"../internal/ops":  "github.com/snagdev/snag/internal/ops",
}

// mechanism are the files of package ops that declare how operations
// are run (Op, Service, Error, the path and query codec), not what the
// API carries.
var mechanism = map[string]bool{"op.go": true, "values.go": true, "catalog.go": true}

// pkgDocs reads the documentation of every package of sources from its
// source, the api package first.
func pkgDocs(t *testing.T) []*doc.Package {
	t.Helper()
	var out []*doc.Package
	for _, dir := range []string{".", "../internal/snag", "../internal/ops"} {
		fset := token.NewFileSet()
		var files []*ast.File
		names, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, n := range names {
			if strings.HasSuffix(n, "_test.go") || dir == "../internal/ops" && mechanism[filepath.Base(n)] {
				continue
			}
			f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		p, err := doc.NewFromFiles(fset, files, sources[dir])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// declared is what the sources declare: each struct type's documentation
// by name (an alias of api's is not one), and the constants, in the
// sources' order.
type declared struct {
	types  map[string]*doc.Type
	consts []*doc.Value
}

// readDeclared reads the declarations of every package of sources.
func readDeclared(t *testing.T) declared {
	t.Helper()
	d := declared{types: map[string]*doc.Type{}}
	for _, p := range pkgDocs(t) {
		for _, ty := range p.Types {
			if _, isStruct := ty.Decl.Specs[0].(*ast.TypeSpec).Type.(*ast.StructType); isStruct {
				d.types[ty.Name] = ty
			}
		}
		d.consts = append(d.consts, p.Consts...)
	}
	return d
}

// text is a doc comment as one paragraph of plain text.
func text(s string) string { return strings.Join(strings.Fields(s), " ") }

// apiType reports whether t is a named type the api package declares or
// names through an alias.
func apiType(t reflect.Type) bool {
	_, ok := pkgPaths[t.PkgPath()]
	return ok && t.Name() != ""
}

// pkgPaths are the import paths of sources, each with its name as a type
// prints it.
var pkgPaths = map[string]string{
	"github.com/snagdev/snag/api":           "api.",
	"github.com/snagdev/snag/internal/snag": "snag.",
	"github.com/snagdev/snag/internal/ops":  "ops.",
}

// typeName renders a field's type, linking the api package's own types.
func typeName(t reflect.Type) string {
	switch {
	case apiType(t) && t.Kind() == reflect.Struct:
		return "[" + t.Name() + "](#" + strings.ToLower(t.Name()) + ")"
	case t.Kind() == reflect.Pointer:
		return "*" + typeName(t.Elem())
	case t.Kind() == reflect.Slice && t.Name() == "":
		return "[]" + typeName(t.Elem())
	}
	s := t.String()
	for _, prefix := range pkgPaths {
		s = strings.ReplaceAll(s, prefix, "api.")
	}
	return strings.TrimPrefix(s, "api.")
}

// generate writes the reference from the api package.
func generate(t *testing.T) string {
	p := readDeclared(t)
	docs := p.types
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# snagd's HTTP API\n\n")
	w("<!-- Generated from the api package by go test ./api -update: edit the doc comments there, not this file. -->\n\n")
	w("snagd serves one project on 127.0.0.1, on the port in `.snag/.port` (7654-7664 unless set). ")
	w("The snag CLI, `snag mcp` and the board are its clients; this page is for a program of your own. ")
	w("The Go types are in package `github.com/snagdev/snag/api`, and package `client` calls every route with them.\n\n")
	w("## Rules every request follows\n\n")
	w("- **Token.** Every route but `GET /health` and `POST /pair` needs `Authorization: Bearer TOKEN`, the token in `~/.snag/token` (or `$SNAG_HOME/token`). A token in a query string is never read. snagd has no OAuth: its `/.well-known/` paths answer 404. A capture credential (`%s...`, the browser extension's) opens `POST /captures` alone (`capture_only` anywhere else).\n", api.CaptureCredentialPrefix)
	w("- **Host and Origin.** The Host must be `127.0.0.1`, `localhost` or `[::1]` with snagd's port (`bad_host`); a browser's request from another origin is refused (`bad_origin`). The one other origin taken is a browser extension's, `chrome-extension://ID`, on `POST /captures` and `POST /pair` alone: snagd answers CORS preflights for those two routes, for that origin, and sets no CORS headers anywhere else.\n")
	w("- **Bodies.** A write sends `Content-Type: application/json` (`bad_content_type`), at most 1 MiB (`too_large`). Unknown fields are refused (`bad_json`); an empty body means no arguments.\n")
	w("- **Queries.** An unknown query parameter, one given twice, or a value that does not read is refused with a 400 naming it, never read as its default.\n")
	w("- **Agents and people.** A request with `%s` (the id `POST /sessions` gave) acts for that agent's session; one without it is a person's. `%s` names the MCP tool call a request serves, for the audit log.\n", api.SessionHeader, api.ToolHeader)
	w("- **Team mode.** While snagd cannot reach its coordination store, every answer to an agent carries `%s`, saying how long and what that means for its leases; claims and resolves then answer 503 `coord_unreachable`, which the agent retries.\n", api.CoordHeader)
	w("- **Waiting.** Until snagd has read every task file, the routes of tasks, sessions, verify and the audit log answer 503 `starting`. A 503 with `Retry-After` (`starting`, `busy`, `changing`) changed nothing: send it again after the wait.\n")
	w("- **Errors.** Every 4xx and 5xx answer is an [Error](#error): a code to branch on and a sentence that names the fix.\n\n")

	w("## Routes\n\n")
	w("| Method | Path | Who | Operation | Query | Body | Answer |\n|---|---|---|---|---|---|---|\n")
	cell := func(v any) string {
		if v == nil {
			return "—"
		}
		return typeName(reflect.TypeOf(v))
	}
	for _, r := range api.Routes {
		ans := "—"
		if r.Answer != nil {
			ans = strconv.Itoa(r.Status) + " " + cell(r.Answer)
		} else if r.Status != 0 {
			ans = strconv.Itoa(r.Status) + " stream"
		}
		op := "—"
		if r.Op != "" {
			op = "`" + r.Op + "`"
		}
		w("| %s | `%s` | %s | %s | %s | %s | %s |\n", r.Method, r.Path, r.Who, op, cell(r.Query), cell(r.Request), ans)
	}
	w("\nWho: *anyone* needs no token; *token* is a person or an agent; *agent* sends the session header; *person* sends none; *extension* is the browser extension, from its `chrome-extension://` origin, with its capture credential and never the token.\n\n")
	patterns := map[string]int{}
	for _, r := range api.Routes {
		patterns[r.Method+" "+r.Path]++
	}
	for _, r := range api.Routes {
		head := r.Method + " " + r.Path
		switch {
		case patterns[head] > 1 && r.When != "":
			head += " (" + r.Who + ", with " + r.When + ")"
		case patterns[head] > 1:
			head += " (" + r.Who + ")"
		}
		w("### %s\n\n%s\n\n", head, r.Doc)
		var parts []string
		if r.Query != nil {
			parts = append(parts, "query "+cell(r.Query))
		}
		if r.Request != nil {
			parts = append(parts, "body "+cell(r.Request))
		}
		if r.Answer != nil {
			parts = append(parts, "answer "+strconv.Itoa(r.Status)+" "+cell(r.Answer))
		}
		if len(parts) > 0 {
			w("Who: %s; %s.\n\n", r.Who, strings.Join(parts, "; "))
		} else {
			w("Who: %s.\n\n", r.Who)
		}
	}

	// The types: those the routes name, in their order, then the types
	// their fields name, then the rest.
	var order []string
	seen := map[string]bool{}
	var visit func(reflect.Type)
	visit = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
			ty = ty.Elem()
		}
		if !apiType(ty) || ty.Kind() != reflect.Struct || seen[ty.Name()] {
			return
		}
		seen[ty.Name()] = true
		order = append(order, ty.Name())
		for i := range ty.NumField() {
			visit(ty.Field(i).Type)
		}
	}
	for _, r := range api.Routes {
		for _, v := range []any{r.Query, r.Request, r.Answer} {
			if v != nil {
				visit(reflect.TypeOf(v))
			}
		}
	}
	for _, v := range append([]any{api.Event{}, api.EventTask{}}, append(eventKinds, api.Error{})...) {
		visit(reflect.TypeOf(v))
	}
	w("## Types\n\n")
	for _, name := range order {
		ty := docs[name]
		if ty == nil {
			t.Fatalf("type %s has no documentation", name)
		}
		w("### %s\n\n%s\n\n", name, text(ty.Doc))
		rt := findType(name)
		fields := fieldDocs(ty)
		w("| Field | JSON | Type | |\n|---|---|---|---|\n")
		for i := range rt.NumField() {
			f := rt.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Anonymous {
				w("| %s | (its fields) | %s | every field of %s, inline |\n", f.Name, typeName(f.Type), f.Name)
				continue
			}
			js := "—"
			if p, ok := f.Tag.Lookup("path"); ok {
				js = "path `{" + p + "}`"
			} else if q, ok := f.Tag.Lookup("query"); ok {
				q, _, _ = strings.Cut(q, ",")
				js = "query `" + q + "`"
			} else if tag := f.Tag.Get("json"); tag != "" && tag != "-" {
				name, opts, _ := strings.Cut(tag, ",")
				js = "`" + name + "`"
				if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
					js += ", left out when empty"
				}
			}
			d := fields[f.Name]
			if d == "" {
				t.Errorf("%s.%s has no doc comment", name, f.Name)
			}
			w("| %s | %s | %s | %s |\n", f.Name, js, typeName(f.Type), strings.ReplaceAll(d, "|", "\\|"))
		}
		w("\n")
	}

	w("## Error codes\n\n| Code | Status and meaning |\n|---|---|\n")
	codes := constDocs(p, "Code")
	for _, c := range api.Codes {
		d, ok := codes[c]
		if !ok {
			t.Errorf("error code %q is in Codes but has no documented Code constant", c)
		}
		w("| `%s` | %s |\n", c, d)
	}
	for c := range codes {
		if !slices.Contains(api.Codes, c) {
			t.Errorf("error code %q has a constant but is not in Codes", c)
		}
	}
	w("\n")
	for _, g := range []struct{ prefix, title string }{
		{"Verify", "Verify codes"}, {"Outcome", "Verify outcomes"}, {"State", "Task states"}, {"Kind", "Event kinds"},
	} {
		w("## %s\n\n| Value | Meaning |\n|---|---|\n", g.title)
		cs := constDocs(p, g.prefix)
		keys := make([]string, 0, len(cs))
		for k := range cs {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return strings.Compare(constOrder[a], constOrder[b]) })
		for _, k := range keys {
			w("| `%s` | %s |\n", k, cs[k])
		}
		w("\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// constOrder is each constant's value by its position in the source, so
// the tables keep the source's order.
var constOrder = map[string]string{}

// constDocs reads the documented constants whose names start with prefix:
// value -> doc (the doc's leading "Name:" or "Name (status):" kept as the
// status).
func constDocs(p declared, prefix string) map[string]string {
	out := map[string]string{}
	lead := regexp.MustCompile(`^\w+(?: \(([^)]*)\))?:\s*`)
	n := 0
	for _, c := range p.consts {
		for _, spec := range c.Decl.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, prefix) || i >= len(vs.Values) {
					continue
				}
				val := constValue(p, vs.Values[i])
				if val == "" {
					continue // api's alias of a constant declared in snag or ops
				}
				d := text(vs.Doc.Text())
				m := lead.FindStringSubmatch(d)
				status := ""
				if m != nil {
					status = m[1]
					d = d[len(m[0]):]
				}
				if status != "" {
					d = status + ": " + d
				}
				out[val] = d
				n++
				constOrder[val] = fmt.Sprintf("%04d", n)
			}
		}
	}
	return out
}

// constValue is a constant's string value: a literal, or another constant
// of the package it names.
func constValue(p declared, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		s, _ := strconv.Unquote(e.Value)
		return s
	case *ast.Ident:
		for _, c := range p.consts {
			for _, spec := range c.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if id.Name != e.Name || i >= len(vs.Values) {
						continue
					}
					if v := constValue(p, vs.Values[i]); v != "" {
						return v // api's alias of it reads as ""
					}
				}
			}
		}
	}
	return ""
}

// fieldDocs reads each field's doc comment of a struct type.
func fieldDocs(ty *doc.Type) map[string]string {
	out := map[string]string{}
	for _, spec := range ty.Decl.Specs {
		ts, ok := spec.(*ast.TypeSpec)
		if !ok {
			continue
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, f := range st.Fields.List {
			for _, n := range f.Names {
				out[n.Name] = text(f.Doc.Text())
			}
		}
	}
	return out
}

// findType is the reflect type of the api package's struct of that name.
func findType(name string) reflect.Type {
	for _, v := range allTypes {
		if t := reflect.TypeOf(v); t.Name() == name {
			return t
		}
	}
	panic("findType: add api." + name + " to allTypes in doc_test.go")
}

// allTypes holds a value of every struct type of the api package.
var allTypes = []any{
	api.TaskRef{}, api.TaskMove{}, api.PlanRef{}, api.NoteRef{}, api.BranchQuery{},
	api.Health{}, api.Counts{}, api.Progress{}, api.Task{}, api.TaskList{}, api.TaskDetail{}, api.Hit{}, api.SearchResult{},
	api.AddRequest{}, api.Added{}, api.MoveRequest{}, api.Moved{}, api.EditRequest{}, api.Edited{}, api.ClaimRequest{}, api.Claim{},
	api.LeaseRequest{}, api.Released{}, api.VerifyRequest{}, api.VerifyPlan{}, api.Resolved{}, api.VerifyState{},
	api.VerifyRun{}, api.Registration{}, api.Session{}, api.Activity{}, api.LiveSession{}, api.Lease{},
	api.Sessions{}, api.EndRequest{}, api.Ended{}, api.AuditEntry{}, api.AuditLog{}, api.Reindexed{},
	api.Rescanned{}, api.LoginCode{}, api.Event{}, api.EventTask{}, api.Error{}, api.ListQuery{},
	api.SearchQuery{}, api.AuditQuery{}, api.Route{},
	api.CaptureRequest{}, api.CaptureAnchor{}, api.Point{}, api.NetworkError{}, api.Captured{}, api.Visual{},
	api.PairingCode{}, api.PairRequest{}, api.Paired{}, api.CaptureCredential{}, api.CaptureCredentials{}, api.Revoked{},
	api.FileClaim{}, api.FilesRequest{}, api.FilesClaimed{}, api.FilesReleased{}, api.FilesCheck{}, api.FilesChecked{},
	api.FileClaims{}, api.Link{}, api.LinkRequest{}, api.Graph{}, api.TaskLease{}, api.BranchLease{}, api.BranchActivity{}, api.ActivityReport{}, api.ActivityFeed{}, api.ForceReleaseRequest{}, api.GuardRequest{}, api.Guarded{}, api.Message{}, api.ReportRequest{},
	api.Messages{}, api.HandoffRequest{}, api.HandedOff{}, api.ContextRequest{}, api.HeldTask{}, api.AgentView{}, api.TeamItem{},
	api.Context{}, api.MessageQuery{}, api.Plan{}, api.PlanList{}, api.PlanDetail{}, api.PlanRequest{},
	api.Worktree{}, api.Worktrees{}, api.Pruned{},
	api.Note{}, api.NoteList{}, api.NoteDetail{}, api.NoteRequest{}, api.NoteQuery{},
}

// eventKinds holds a value of the data type of every event kind of
// GET /events, in the order of the Kind* constants (VerifyOutcome after
// VerifyEvent, which embeds it), and Relayed last.
var eventKinds = []any{
	api.TaskEvent{}, api.ProblemEvent{}, api.LeaseEvent{}, api.SessionEvent{}, api.FilesEvent{}, api.HandoffEvent{},
	api.NoteEvent{}, api.PlanEvent{}, api.ReportEvent{}, api.RenumberEvent{}, api.RescanEvent{}, api.VerifyEvent{}, api.VerifyOutcome{},
	api.TeamEvent{}, api.Relayed{},
}

func init() { allTypes = append(allTypes, eventKinds...) }

// TestEveryTypeIsInTheReference checks that allTypes names every struct
// type the api package declares or names through an alias, so none is
// left out of the reference unnoticed.
func TestEveryTypeIsInTheReference(t *testing.T) {
	for name := range readDeclared(t).types {
		found := false
		for _, v := range allTypes {
			found = found || reflect.TypeOf(v).Name() == name
		}
		if !found {
			t.Errorf("api.%s is not in allTypes (doc_test.go)", name)
		}
	}
}

// daemonSources reads the daemon's Go files (not its tests, nor the
// board's pages, which are not the API).
func daemonSources(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob("../internal/daemon/*.go")
	if err != nil || len(names) == 0 {
		t.Fatalf("no daemon sources: %v", err)
	}
	out := map[string]string{}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") || filepath.Base(n) == "board.go" {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

// TestRoutesAreServed checks the route table against snagd's: every
// "METHOD /path" pattern the daemon registers is in Routes, and every
// route of Routes is registered (/login-codes and /mcp are registered
// through constants, and are checked by their own tests).
func TestRoutesAreServed(t *testing.T) {
	pat := regexp.MustCompile(`\.Handle(?:Func)?\("((?:GET|POST|PUT|PATCH|DELETE) /[^"]*)"`)
	served := map[string]bool{}
	for name, src := range daemonSources(t) {
		for _, m := range pat.FindAllStringSubmatch(src, -1) {
			served[m[1]] = true
			known := false
			for _, r := range api.Routes {
				known = known || r.Method+" "+r.Path == m[1]
			}
			if !known {
				t.Errorf("%s serves %q, which api.Routes (and so docs/api.md) lacks", name, m[1])
			}
		}
	}
	for _, r := range api.Routes {
		if r.Path == "/login-codes" || r.Path == "/mcp" || r.Op != "" {
			continue // an operation's route is served from the table (daemon.TestEveryOperationIsServed)
		}
		if !served[r.Method+" "+r.Path] {
			t.Errorf("api.Routes has %s %s, which snagd does not serve", r.Method, r.Path)
		}
	}
}

// TestErrorCodesAreDeclared checks that every error code the daemon
// answers with is one of api.Codes: a literal code in an apiError, a
// query parameter that does not read (bad_ plus its name), or an api.Code
// constant.
func TestErrorCodesAreDeclared(t *testing.T) {
	lit := regexp.MustCompile(`apiError\{Status: http\.Status\w+, Code: "(\w+)"`)
	failed := regexp.MustCompile(`\.fail\("(\w+)",`)
	param := regexp.MustCompile(`q\.(?:int|flag)\("(\w+)"`)
	found := 0
	for name, src := range daemonSources(t) {
		var codes []string
		for _, re := range []*regexp.Regexp{lit, failed} {
			for _, m := range re.FindAllStringSubmatch(src, -1) {
				codes = append(codes, m[1])
			}
		}
		for _, m := range param.FindAllStringSubmatch(src, -1) {
			codes = append(codes, "bad_"+m[1])
		}
		for _, c := range codes {
			found++
			if !slices.Contains(api.Codes, c) {
				t.Errorf("%s answers error code %q, which api.Codes (and so docs/api.md) lacks", name, c)
			}
		}
	}
	for _, r := range api.Routes {
		if r.Query == nil {
			continue
		}
		for _, f := range reflect.VisibleFields(reflect.TypeOf(r.Query)) {
			name, ok := f.Tag.Lookup("query")
			if k := f.Type.Kind(); !ok || k != reflect.Int && k != reflect.Int64 && k != reflect.Bool {
				continue
			}
			name, _, _ = strings.Cut(name, ",")
			found++
			if c := "bad_" + name; !slices.Contains(api.Codes, c) {
				t.Errorf("%s %s refuses a bad %s with %q, which api.Codes (and so docs/api.md) lacks", r.Method, r.Path, name, c)
			}
		}
	}
	if found < 20 {
		t.Errorf("found only %d error codes in the daemon's sources: has the way it writes them changed?", found)
	}
}

// TestAnswersAreAPITypes checks that no answer of the daemon is a map
// literal: every answer is one of this package's types, so the reference
// says what it holds.
func TestAnswersAreAPITypes(t *testing.T) {
	call := regexp.MustCompile(`writeJSON\(w, [^,]+, (map\[|\[\]|struct\s*\{)`)
	for name, src := range daemonSources(t) {
		for _, m := range call.FindAllString(src, -1) {
			t.Errorf("%s answers with %q...: answer with a type of package api instead", name, m)
		}
	}
}
