// Package ops holds the operations' requests and answers: what a claim, a
// handoff, a plan's write, a file claim or a list takes and gives back,
// over the domain's values (package snag). snagd's HTTP API (package api)
// carries them through aliases, and the MCP server speaks them to its
// backend, so neither transport declares its own copy. The queries of the
// read operations encode themselves as a URL query (Encode), the one
// piece of the wire they hold: a Go method cannot be declared on an
// alias.
//
// It must not import any package of snag's but snag and queue.
package ops
