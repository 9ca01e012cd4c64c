package index

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// Hit is one search result.
type Hit struct {
	Row
	Snippet string `json:"snippet"`
}

// Search runs a full-text query over titles, bodies, console errors and
// suspect file paths of every task, inbox and terminal ones included, best
// match first. Every word must match: the last one as a prefix too (it may
// be a word still being typed), the others as whole words. Quotes and
// operators a person types are taken as plain words.
func (db *DB) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	if limit <= 0 {
		limit = 20
	}
	words := queryWords(query)
	if len(words) == 0 {
		return nil, errors.New("search: empty query: give a word or two to look for")
	}
	var hits []Hit
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		match, err := ftsMatch(conn, words)
		if err != nil || match == "" {
			return err
		}
		collect := func(s *sqlite.Stmt) error {
			hits = append(hits, Hit{Row: *scanRow(s), Snippet: s.ColumnText(rowWidth)})
			return nil
		}
		// Ranking scores every match (about 7 µs each), so it is kept for
		// queries that match at most rankLimit tasks. A broader query
		// gives way: tasks whose title matches first, then the rest, in
		// index order, each list walked only as far as the page needs.
		var matches int
		err = sqlitex.Execute(conn, `SELECT count(*) FROM (SELECT 1 FROM tasks_fts WHERE tasks_fts MATCH :q LIMIT +:cap)`,
			&sqlitex.ExecOptions{
				Named:      map[string]any{":q": match, ":cap": int64(rankLimit + 1)},
				ResultFunc: func(s *sqlite.Stmt) error { matches = s.ColumnInt(0); return nil },
			})
		if err != nil {
			return err
		}
		// Either way the page's rows are chosen first, by tier (0: the
		// title matches) and score, and a snippet is made for them alone:
		// a title match's from its title.
		named := map[string]any{":q": match, ":title": "title : (" + match + ")", ":limit": int64(limit)}
		pick := `
			SELECT hn, 0.0 AS score, min(tier) AS tier FROM (
				SELECT * FROM (SELECT rowid AS hn, 0 AS tier FROM tasks_fts WHERE tasks_fts MATCH :title ORDER BY rowid LIMIT +:limit)
				UNION ALL
				SELECT * FROM (SELECT rowid AS hn, 1 AS tier FROM tasks_fts WHERE tasks_fts MATCH :q ORDER BY rowid LIMIT +:limit))
			GROUP BY hn ORDER BY tier, hn LIMIT +:limit`
		if matches <= rankLimit {
			// Every match is scored (FTS5 only knows a score once it has
			// them all); the title matches are found among them without
			// reading a task's text.
			pick = `
				SELECT rowid AS hn, rank AS score, rowid NOT IN (SELECT rowid FROM tasks_fts WHERE tasks_fts MATCH :title) AS tier
				FROM tasks_fts WHERE tasks_fts MATCH :q AND rank MATCH 'bm25(10.0, 1.0, 2.0, 2.0)'
				ORDER BY tier, score LIMIT +:limit`
		}
		err = sqlitex.Execute(conn, `
			WITH hit AS MATERIALIZED (`+pick+`)
			SELECT `+rowColumns+`, (SELECT snippet(tasks_fts, -1, '[', ']', '…', 10) FROM tasks_fts
					WHERE tasks_fts MATCH iif(hit.tier = 0, :title, :q) AND rowid = hit.hn)
			FROM hit JOIN tasks ON tasks.n = hit.hn
			ORDER BY hit.tier, hit.score, tasks.n`,
			&sqlitex.ExecOptions{Named: named, ResultFunc: collect})
		if err != nil {
			return err
		}
		rows := make([]*Row, len(hits))
		for i := range hits {
			rows[i] = &hits[i].Row
		}
		return blockers(conn, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	return hits, nil
}

// rankLimit is the most matches a search ranks by relevance.
var rankLimit = 1000

// queryWords splits what a person typed into the words of a search:
// letters, digits and what joins them in names and paths (_ . - /).
func queryWords(q string) []string {
	var words []string
	for _, w := range strings.FieldsFunc(q, func(r rune) bool {
		return !(r == '_' || r == '.' || r == '-' || r == '/' || r > 127 || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		if w = strings.Trim(w, ".-/"); w != "" {
			words = append(words, w)
		}
	}
	return words
}

// ftsJoin makes the FTS5 query of words, the last one spelled out as the
// words of the index it is a prefix of (lastAs), or matched by FTS5's own
// prefix query when lastAs is nil.
func ftsJoin(words, lastAs []string) string {
	terms := make([]string, len(words))
	for i, w := range words {
		terms[i] = ftsQuote(w)
	}
	last := len(words) - 1
	if lastAs == nil {
		terms[last] += "*"
		return strings.Join(terms, " ")
	}
	alts := make([]string, len(lastAs))
	for i, w := range lastAs {
		alts[i] = ftsQuote(w)
	}
	// Phrases side by side must all match, except one the tokenizer finds
	// no word in ("€"), which FTS5 leaves out; an OR group needs an AND.
	or := "(" + strings.Join(alts, " OR ") + ")"
	if last == 0 {
		return or
	}
	return strings.Join(terms[:last], " ") + " AND " + or
}

func ftsQuote(w string) string { return `"` + strings.ReplaceAll(w, `"`, `""`) + `"` }

// ftsMatch makes the FTS5 query of a search's words, or "" when the last
// word starts no word of the index, so that nothing can match.
//
// FTS5 answers a prefix query ("the"*) by merging the whole list of
// matches of every word of the index it covers before it hands over the
// first row, which for a word in every one of 100,000 tasks took 50 ms of
// CPU, three times a search. So the last word's prefix is looked up in the
// index's list of words first (a probe of temp.tasks_fts_terms per word it
// covers) and spelled out as their OR, which FTS5 reads lazily, only as far
// as the page needs. A prefix of more than maxPrefixTerms words of the
// index, or a word outside ASCII (whose folding only the tokenizer knows),
// is left to FTS5's prefix query, which finds the same rows more slowly.
func ftsMatch(conn *sqlite.Conn, words []string) (string, error) {
	last := words[len(words)-1]
	end := len(last)
	for end > 0 && !asciiAlnum(last[end-1]) {
		end--
	}
	start := end
	for start > 0 && asciiAlnum(last[start-1]) {
		start--
	}
	if start == end || strings.IndexFunc(last, func(r rune) bool { return r > 127 }) >= 0 || !hasToken(words[:len(words)-1]) {
		return ftsJoin(words, nil), nil
	}
	// The last token of the last word is what FTS5 matches as a prefix;
	// what comes before it stays in the phrase as typed.
	head, prefix := last[:start], strings.ToLower(last[start:end])
	upTo := prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
	alts := []string{}
	for from := prefix; ; {
		var term string
		err := sqlitex.Execute(conn, `SELECT term FROM temp.tasks_fts_terms WHERE term >= :from AND term < :to LIMIT 1`,
			&sqlitex.ExecOptions{
				Named:      map[string]any{":from": from, ":to": upTo},
				ResultFunc: func(s *sqlite.Stmt) error { term = s.ColumnText(0); return nil },
			})
		switch {
		case err != nil:
			return "", err
		case (term == "" || !strings.HasPrefix(term, prefix)) && len(alts) == 0:
			return "", nil // no word of the index starts so: nothing matches
		case term == "" || !strings.HasPrefix(term, prefix):
			return ftsJoin(words, alts), nil
		case len(alts) == maxPrefixTerms || strings.IndexFunc(term, func(r rune) bool { return r > 127 }) >= 0:
			return ftsJoin(words, nil), nil
		}
		alts = append(alts, head+term)
		from = term + "\x01" // the next word of the index after term
	}
}

// maxPrefixTerms is the most words of the index a search's last word is
// spelled out as.
const maxPrefixTerms = 64

// hasToken reports whether words is empty or holds a word the tokenizer
// surely finds a word of the index in (an ASCII letter or digit): "€ x"
// AND an OR group would match nothing, where "€" "x" matches x.
func hasToken(words []string) bool {
	for _, w := range words {
		if strings.IndexFunc(w, func(r rune) bool { return r < 128 && asciiAlnum(byte(r)) }) >= 0 {
			return true
		}
	}
	return len(words) == 0
}

func asciiAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
