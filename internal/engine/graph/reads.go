package graph

import (
	"context"
	"errors"
	"strings"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
)

// Notes lists notes newest first, as f picks them (the engine's Notes,
// which its team context reads too).
func (s *Service) Notes(ctx context.Context, f engine.NoteFilter) ([]index.NoteRow, error) {
	return s.e.Notes(ctx, f)
}

// Node is a note with its edges both ways.
type Node struct {
	index.NoteRow
	In []index.LinkRow // the links of other notes to it
}

// Note reads one note by its key or id, with its edges both ways.
func (s *Service) Note(ctx context.Context, ref string) (Node, error) {
	if err := s.e.SyncNotes(ctx, false); err != nil {
		return Node{}, err
	}
	n, err := s.db.Note(ctx, strings.ToUpper(ref))
	if errors.Is(err, index.ErrNotFound) {
		n, err = s.db.Note(ctx, ref)
	}
	if errors.Is(err, index.ErrNotFound) {
		return Node{}, refuse(engine.ErrNotFound, "no_note", "no note %s: snag_nodes (snag notes) lists them", ref)
	}
	if err != nil {
		return Node{}, err
	}
	in, err := s.db.LinksTo(ctx, n.Key, n.ID)
	return Node{NoteRow: n, In: in}, err
}

// Graph is every note that reads cleanly, as f picks them (Limit 0: all),
// and every edge between notes.
func (s *Service) Graph(ctx context.Context, f engine.NoteFilter) ([]index.NoteRow, []index.LinkRow, error) {
	if err := s.e.SyncNotes(ctx, false); err != nil {
		return nil, nil, err
	}
	if f.Limit == 0 {
		f.Limit = 1 << 30
	}
	ns, err := s.db.Notes(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	ls, err := s.db.Links(ctx)
	return ns, ls, err
}

// SearchNotes runs a full-text query over the notes.
func (s *Service) SearchNotes(ctx context.Context, query string, limit int) ([]index.NoteRow, error) {
	if err := s.e.SyncNotes(ctx, false); err != nil {
		return nil, err
	}
	return s.db.SearchNotes(ctx, query, limit)
}
