package mcp

import (
	"context"
	"sort"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The resources a client may subscribe to: the whole-queue ones, and any
// snag://task/{id}.
var wholeQueue = []string{"snag://queue", "snag://plan", "snag://map"}

// subs is what a server's clients subscribed to, and the goroutine that
// follows snagd's events for them. The SDK keeps which session subscribed
// to which URI and sends the notifications; subs says which URIs an event
// touches. It is safe for concurrent use.
type subs struct {
	mu    sync.Mutex
	tasks map[string]string // snag://task/{ref} -> the task's key
	whole map[string]bool
	once  sync.Once
}

// subscribe validates and records a subscription, and starts following
// snagd's events when there is a daemon.
func (s *server) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	switch {
	case contains(wholeQueue, uri):
		s.subs.mu.Lock()
		if s.subs.whole == nil {
			s.subs.whole = map[string]bool{}
		}
		s.subs.whole[uri] = true
		s.subs.mu.Unlock()
	case strings.HasPrefix(uri, "snag://task/"):
		var det *Detail
		_, _, err := s.read(ctx, func(b Backend) (err error) { det, err = b.Get(ctx, strings.TrimPrefix(uri, "snag://task/")); return })
		if err != nil {
			return sdk.ResourceNotFoundError(uri)
		}
		s.subs.mu.Lock()
		if s.subs.tasks == nil {
			s.subs.tasks = map[string]string{}
		}
		s.subs.tasks[uri] = det.Key
		s.subs.mu.Unlock()
	default: // no such resource here
		return sdk.ResourceNotFoundError(uri)
	}
	if d := s.daemon(); d != nil {
		s.subs.once.Do(func() { go d.Watch(s.life, s.changed) })
	}
	return nil
}

// unsubscribe forgets a subscription (the SDK forgets the session's).
func (s *server) unsubscribe(ctx context.Context, req *sdk.UnsubscribeRequest) error {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	delete(s.subs.tasks, req.Params.URI)
	delete(s.subs.whole, req.Params.URI)
	return nil
}

// changed sends notifications/resources/updated for what a change touches:
// the whole-queue resources, and the subscribed task it names (every
// subscribed task when key is "").
func (s *server) changed(key string) {
	s.subs.mu.Lock()
	var uris []string
	for uri := range s.subs.whole {
		uris = append(uris, uri)
	}
	for uri, k := range s.subs.tasks {
		if key == "" || k == key {
			uris = append(uris, uri)
		}
	}
	s.subs.mu.Unlock()
	sort.Strings(uris)
	for _, uri := range uris {
		if err := s.srv.ResourceUpdated(s.life, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			s.log.Info("resource updated", "uri", uri, "err", err)
		}
	}
}

// maxCompletions is the most values completion/complete answers (the
// protocol's cap).
const maxCompletions = 100

// complete answers completion/complete for the id of snag://task/{id}:
// task keys, then ids, that start with what was typed (case-insensitive),
// at most 100, with the total.
func (s *server) complete(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	p := req.Params
	res := &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}
	if p == nil || p.Ref == nil || p.Ref.Type != "ref/resource" || p.Ref.URI != "snag://task/{id}" || p.Argument.Name != "id" {
		return res, nil
	}
	prefix := strings.ToLower(p.Argument.Value)
	var keys, ids []string
	_, _, err := s.read(ctx, func(b Backend) error {
		keys, ids = nil, nil
		cursor := ""
		for n := 0; n < 20; n++ { // at most 20,000 tasks are looked at
			pg, err := b.List(ctx, ListQuery{Limit: 1000, Cursor: cursor, All: true})
			if err != nil {
				return err
			}
			for _, r := range pg.Rows {
				if r.Key != "" && strings.HasPrefix(strings.ToLower(r.Key), prefix) {
					keys = append(keys, r.Key)
				}
				if r.ID != "" && strings.HasPrefix(strings.ToLower(r.ID), prefix) {
					ids = append(ids, r.ID)
				}
			}
			if cursor = pg.Next; cursor == "" {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	sort.Strings(ids)
	all := append(keys, ids...)
	res.Completion.Total = len(all)
	if len(all) > maxCompletions {
		all, res.Completion.HasMore = all[:maxCompletions], true
	}
	res.Completion.Values = append(res.Completion.Values, all...)
	return res, nil
}

// keyLess orders keys by their number: SNAG-2 before SNAG-10.
func keyLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
