package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxResource is the most bytes a resource answers (about 8,000 tokens);
// a larger payload is projected to a summary naming the file on disk.
const maxResource = 30000

func (s *server) addResources(srv *sdk.Server) {
	srv.AddResource(&sdk.Resource{URI: "snag://queue", Name: "queue", MIMEType: "application/json",
		Description: "The open queue: every task not resolved or cancelled, in order."}, s.queueResource)
	srv.AddResource(&sdk.Resource{URI: "snag://plan", Name: "plan", MIMEType: "application/json",
		Description: "plan.json: the generated snapshot of the queue."}, s.planResource)
	srv.AddResource(&sdk.Resource{URI: "snag://map", Name: "map", MIMEType: "application/json",
		Description: "Source file -> open tasks that suspect it, and who holds them."}, s.mapResource)
	srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: "snag://task/{id}", Name: "task", MIMEType: "text/markdown",
		Description: "A task file's bytes, unchanged."}, s.taskResource)
	srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: "snag://shot/{name}", Name: "screenshot",
		Description: "A screenshot in .snag/shots, as snag_get links it."}, s.shotResource)
}

// shotURI is the snag://shot/ URI of a screenshot named relative to
// .snag/, or "" when it is not a file directly in .snag/shots.
func shotURI(rel string) string {
	name, ok := strings.CutPrefix(path.Clean(rel), "shots/")
	if !ok || name == "" || strings.ContainsAny(name, "/\\") || !filepath.IsLocal(name) {
		return ""
	}
	return "snag://shot/" + url.PathEscape(name)
}

// shotResource reads a screenshot by its snag://shot/ URI: a plain file
// name in .snag/shots, opened through os.Root, so no name reaches outside
// it (no "..", no separator, no symlink out).
func (s *server) shotResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	name, err := url.PathUnescape(strings.TrimPrefix(req.Params.URI, "snag://shot/"))
	if err != nil || name == "" || strings.ContainsAny(name, "/\\") || !filepath.IsLocal(name) {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	data, err := readLocal(s.opts.Root, "shots/"+name, maxShot)
	if err != nil {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: mimeOf(name), Blob: data}}}, nil
}

func jsonContents(uri string, v any, file string) (*sdk.ReadResourceResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) > maxResource {
		b, _ = json.Marshal(map[string]any{"projected": true, "bytes": len(b),
			"summary": fmt.Sprintf("%d bytes is over the %d-byte budget", len(b), maxResource), "file": file})
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

func (s *server) openRows(ctx context.Context, req *sdk.ReadResourceRequest) ([]Row, string, error) {
	var rows []Row
	src, _, err := s.read(s.begin(ctx, req, "resource"), func(b Backend) error {
		rows = nil
		cursor := ""
		for {
			p, err := b.List(ctx, ListQuery{Limit: 1000, Cursor: cursor})
			if err != nil {
				return err
			}
			rows = append(rows, p.Rows...)
			if p.Next == "" || len(rows) > 100000 {
				return nil
			}
			cursor = p.Next
		}
	})
	return rows, src, err
}

func (s *server) queueResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	rows, src, err := s.openRows(ctx, req)
	if err != nil {
		return nil, err
	}
	if rows == nil {
		rows = []Row{}
	}
	return jsonContents(req.Params.URI, map[string]any{"source": src, "tasks": rows}, filepath.Join(s.opts.Root, ".snag", "plan.json"))
}

func (s *server) planResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	name := filepath.Join(s.opts.Root, ".snag", "plan.json")
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w (snagd writes it; snag://queue lists the tasks)", name, err)
	}
	if len(b) > maxResource {
		b, _ = json.Marshal(map[string]any{"projected": true, "bytes": len(b),
			"summary": fmt.Sprintf("plan.json is %d bytes, over the %d-byte budget: Read the file, or use snag_list", len(b), maxResource), "file": name})
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

type mapEntry struct {
	Key    string `json:"key"`
	Status string `json:"status"`
	Holder string `json:"holder,omitempty"`
	Lines  string `json:"lines,omitempty"`
}

func (s *server) mapResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	rows, src, err := s.openRows(ctx, req)
	if err != nil {
		return nil, err
	}
	open := map[string]Row{}
	for _, r := range rows {
		open[r.ID] = r
	}
	all, err := s.files.read() // suspect files come from the task files
	if err != nil {
		return nil, err
	}
	files := map[string][]mapEntry{}
	for _, ft := range all {
		r, ok := open[ft.t.ID]
		if !ok {
			continue
		}
		for _, f := range ft.t.SuspectFiles {
			e := mapEntry{Key: r.Key, Status: r.Status, Holder: r.Assignee}
			if l := f.String(); l != f.Path {
				e.Lines = strings.TrimPrefix(l, f.Path+":")
			}
			files[f.Path] = append(files[f.Path], e)
		}
	}
	for _, es := range files {
		sort.Slice(es, func(i, j int) bool { return es[i].Key < es[j].Key })
	}
	return jsonContents(req.Params.URI, map[string]any{"source": src, "files": files}, filepath.Join(s.opts.Root, ".snag", "tasks"))
}

func (s *server) taskResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	ref := strings.TrimPrefix(req.Params.URI, "snag://task/")
	var det *Detail
	_, _, err := s.read(s.begin(ctx, req, "resource"), func(b Backend) (err error) { det, err = b.Get(ctx, ref); return })
	if err != nil || det.Path == "" {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	b, err := readLocal(s.opts.Root, det.Path, 1<<20)
	if err != nil {
		return nil, err
	}
	if len(b) > maxResource {
		b = []byte(fmt.Sprintf("%s is %d bytes, over the %d-byte budget: Read %s", det.Key, len(b), maxResource,
			filepath.Join(s.opts.Root, ".snag", filepath.FromSlash(det.Path))))
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: string(b)}}}, nil
}
