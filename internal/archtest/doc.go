// Package archtest holds the tests that keep snag's shape: dependency arrows
// point inward (queue imports none of snag's packages nor SQLite, fsnotify
// or the MCP SDK; watch and mcp know nothing of the index), and every
// package says what it is for in a package comment. It has no code of its
// own and nothing imports it.
package archtest
