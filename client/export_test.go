package client

// ReadTaskList and ReadSearchResult are the answers' own reader, for the
// tests that hold it to encoding/json.
var (
	ReadTaskList     = readTaskList
	ReadSearchResult = readSearchResult
	DecodeAnswer     = decodeAnswer
)
