// Package mcp will serve snag's tools and resources to agents over the Model
// Context Protocol, against a small interface that both the daemon client
// and the file reader meet. It holds no code yet.
package mcp
