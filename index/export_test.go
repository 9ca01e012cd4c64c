package index

// SetBulkMin lowers the number of added rows that makes a scan a bulk load,
// so tests can take that path with few files, and returns a function that
// puts it back.
func SetBulkMin(n int) (restore func()) {
	old := bulkMin
	bulkMin = n
	return func() { bulkMin = old }
}

// FTSQuery is ftsQuery, for benchmarks that count a query's matches.
var FTSQuery = ftsQuery

// SetRankLimit changes how many matches a search ranks, and returns a
// function that puts it back.
func SetRankLimit(n int) (restore func()) {
	old := rankLimit
	rankLimit = n
	return func() { rankLimit = old }
}
