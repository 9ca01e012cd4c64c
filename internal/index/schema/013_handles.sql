-- snag.db, version 13: handles, the bearers an agent carries across
-- requests when no connection stands for it (MCP 2026-07-28). A lease
-- handle names one lease (task and epoch); an agent handle names a
-- session. Each is kept only as its SHA-256, with the credential that made
-- it: a handle made over one token is no good over another.
CREATE TABLE handles (
  hash       TEXT    PRIMARY KEY,          -- hex SHA-256 of the handle
  kind       TEXT    NOT NULL,             -- lease or agent
  session_id INTEGER NOT NULL REFERENCES sessions(id),
  task_id    TEXT    NOT NULL DEFAULT '',  -- a lease handle's task
  epoch      INTEGER NOT NULL DEFAULT 0,   -- and its lease's epoch
  cred       TEXT    NOT NULL DEFAULT '',  -- the credential that made it
  created    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX handles_session ON handles(session_id);
CREATE INDEX handles_cred ON handles(cred);

-- A session no connection holds (an agent known by its handle) lives
-- until expires (unix nanoseconds), moved on by every call that names one
-- of its handles; 0 for a session a stream or a process holds.
ALTER TABLE sessions ADD COLUMN expires INTEGER NOT NULL DEFAULT 0;
