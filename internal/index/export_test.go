package index

import (
	"context"
	"time"

	"zombiezen.com/go/sqlite"
)

// SetBulkMin lowers the number of added rows that makes a scan a bulk load,
// so tests can take that path with few files, and returns a function that
// puts it back.
func SetBulkMin(n int) (restore func()) {
	old := bulkMin
	bulkMin = n
	return func() { bulkMin = old }
}

// FTSQuery is the FTS5 query of a search for q with the last word left
// to FTS5's own prefix match, for benchmarks that count a query's matches
// and for tests that compare it with the query a search runs.
func FTSQuery(q string) string {
	words := queryWords(q)
	if len(words) == 0 {
		return ""
	}
	return ftsJoin(words, nil)
}

// FTSMatch is the FTS5 query a search for q runs on db, the last word's
// prefix spelled out as the words of the index.
func FTSMatch(ctx context.Context, db *DB, q string) (match string, err error) {
	err = db.withConn(ctx, func(conn *sqlite.Conn) error {
		match, err = ftsMatch(conn, queryWords(q))
		return err
	})
	return match, err
}

// SetRankLimit changes how many matches a search ranks, and returns a
// function that puts it back.
func SetRankLimit(n int) (restore func()) {
	old := rankLimit
	rankLimit = n
	return func() { rankLimit = old }
}

// MaxPrefixTerms is the most words of the index a search's last word is
// spelled out as.
const MaxPrefixTerms = maxPrefixTerms

// SetStampMargin changes how long after a file's last change its stamp is
// trusted (taskfs.StampMargin), and returns a function that puts it back.
func SetStampMargin(d time.Duration) (restore func()) {
	old := stampMargin
	stampMargin = d
	return func() { stampMargin = old }
}
