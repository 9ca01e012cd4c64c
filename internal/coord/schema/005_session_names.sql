-- One live agent per name in a workspace: holders, handoffs and reports
-- name agents by name alone.
CREATE UNIQUE INDEX sessions_live_name ON sessions (workspace, name) WHERE ended IS NULL;
