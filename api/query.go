package api

import (
	"github.com/snagdev/snag/internal/ops"
)

// ListQuery is ops.ListQuery: the query of GET /tasks.
type ListQuery = ops.ListQuery

// SearchQuery is ops.SearchQuery: the query of GET /search.
type SearchQuery = ops.SearchQuery

// AuditQuery is ops.AuditQuery: the query of GET /audit.
type AuditQuery = ops.AuditQuery

// MessageQuery is ops.MessageQuery: the query of GET /reports and GET
// /handoffs.
type MessageQuery = ops.MessageQuery
