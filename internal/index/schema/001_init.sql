-- snag.db, version 1. The tasks tables are an index: snag reindex rebuilds
-- them from the files at any time. The live-state tables (sessions, leases,
-- epochs, file_claims, messages, audit, meta) are not: nothing rebuilds them,
-- and a reindex never touches them.

CREATE TABLE tasks (
  n          INTEGER PRIMARY KEY,
  path       TEXT    NOT NULL UNIQUE,   -- relative to .snag/: tasks/<name>
  sha256     BLOB    NOT NULL,          -- of the file's bytes; empty when unreadable
  size       INTEGER NOT NULL,
  mtime      INTEGER NOT NULL,          -- unix nanoseconds
  id         TEXT    NOT NULL DEFAULT '', -- '' for a file that never parsed
  key        TEXT    NOT NULL DEFAULT '', -- SNAG-<n>
  key_num    INTEGER,
  title      TEXT    NOT NULL DEFAULT '',
  status     TEXT    NOT NULL DEFAULT '',
  trust      TEXT    NOT NULL DEFAULT '',
  severity   TEXT    NOT NULL DEFAULT '',
  sev_rank   INTEGER NOT NULL DEFAULT 9,
  kind       TEXT    NOT NULL DEFAULT '',
  wave       INTEGER NOT NULL DEFAULT 0,
  plan       TEXT    NOT NULL DEFAULT '',
  assignee   TEXT    NOT NULL DEFAULT '',
  created    INTEGER NOT NULL DEFAULT 0, -- unix nanoseconds, 0 when unknown
  updated    INTEGER NOT NULL DEFAULT 0,
  terminal   INTEGER NOT NULL DEFAULT 0, -- resolved or cancelled
  first_file TEXT    NOT NULL DEFAULT '', -- first suspect file, path:a-b
  console    TEXT    NOT NULL DEFAULT '', -- console errors, for search
  files      TEXT    NOT NULL DEFAULT '', -- suspect file paths, for search
  data       TEXT    NOT NULL DEFAULT '{}', -- the whole task as JSON
  body       TEXT    NOT NULL DEFAULT '',
  state      TEXT    NOT NULL DEFAULT 'ok', -- ok | invalid | conflict
  error      TEXT    NOT NULL DEFAULT '',
  error_line INTEGER NOT NULL DEFAULT 0,
  stale      INTEGER NOT NULL DEFAULT 0, -- holds the last good data of a file that no longer parses
  dup        INTEGER NOT NULL DEFAULT 0  -- another file has the same id or key
);
CREATE INDEX tasks_id ON tasks(id);
CREATE INDEX tasks_key ON tasks(key);
CREATE INDEX tasks_order ON tasks(terminal, wave, sev_rank, created, id);
CREATE INDEX tasks_status ON tasks(status, wave, sev_rank, created, id);

-- depends_on, one row per reference, normalised to an id or SNAG-<n>.
CREATE TABLE deps (
  task_n INTEGER NOT NULL REFERENCES tasks(n) ON DELETE CASCADE,
  ref    TEXT    NOT NULL,
  PRIMARY KEY (task_n, ref)
) WITHOUT ROWID;
CREATE INDEX deps_ref ON deps(ref);

CREATE VIRTUAL TABLE tasks_fts USING fts5(
  title, body, console, files,
  content='tasks', content_rowid='n', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER tasks_fts_ai AFTER INSERT ON tasks BEGIN
  INSERT INTO tasks_fts(rowid, title, body, console, files)
  VALUES (new.n, new.title, new.body, new.console, new.files);
END;
CREATE TRIGGER tasks_fts_ad AFTER DELETE ON tasks BEGIN
  INSERT INTO tasks_fts(tasks_fts, rowid, title, body, console, files)
  VALUES ('delete', old.n, old.title, old.body, old.console, old.files);
END;
CREATE TRIGGER tasks_fts_au AFTER UPDATE OF title, body, console, files ON tasks BEGIN
  INSERT INTO tasks_fts(tasks_fts, rowid, title, body, console, files)
  VALUES ('delete', old.n, old.title, old.body, old.console, old.files);
  INSERT INTO tasks_fts(rowid, title, body, console, files)
  VALUES (new.n, new.title, new.body, new.console, new.files);
END;

-- Live state (DESIGN section 6).

CREATE TABLE sessions (
  id             INTEGER PRIMARY KEY,
  name           TEXT    NOT NULL,       -- VESPER, or the name the agent asked for
  client         TEXT    NOT NULL DEFAULT '',
  client_version TEXT    NOT NULL DEFAULT '',
  pid            INTEGER NOT NULL DEFAULT 0,
  pid_start      INTEGER NOT NULL DEFAULT 0, -- process start time, so a reused pid is not the agent
  boot_id        TEXT    NOT NULL DEFAULT '',
  host           TEXT    NOT NULL DEFAULT '',
  transport      TEXT    NOT NULL DEFAULT '',
  started        INTEGER NOT NULL,
  last_seen      INTEGER NOT NULL,
  ended          INTEGER,
  end_reason     TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX sessions_live ON sessions(name) WHERE ended IS NULL;

CREATE TABLE leases (
  id         INTEGER PRIMARY KEY,
  task_id    TEXT    NOT NULL,
  session_id INTEGER REFERENCES sessions(id),
  holder     TEXT    NOT NULL,           -- the session's name, kept when the session row is gone
  epoch      INTEGER NOT NULL,           -- fencing token: later writes must present it
  acquired   INTEGER NOT NULL,
  ended      INTEGER,
  end_reason TEXT    NOT NULL DEFAULT '',
  detached   INTEGER NOT NULL DEFAULT 0  -- re-derived from the files; no live session yet
);
CREATE UNIQUE INDEX leases_live ON leases(task_id) WHERE ended IS NULL;
CREATE INDEX leases_session ON leases(session_id) WHERE ended IS NULL;

-- The last epoch granted per task: it only grows, across leases and rebuilds.
CREATE TABLE epochs (
  task_id TEXT PRIMARY KEY,
  epoch   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE file_claims (
  id         INTEGER PRIMARY KEY,
  path       TEXT    NOT NULL,           -- canonical, relative to the repository root
  session_id INTEGER NOT NULL REFERENCES sessions(id),
  task_id    TEXT,
  acquired   INTEGER NOT NULL,
  expires    INTEGER NOT NULL,
  released   INTEGER
);
CREATE UNIQUE INDEX file_claims_live ON file_claims(path) WHERE released IS NULL;

CREATE TABLE messages (
  id           INTEGER PRIMARY KEY,
  created      INTEGER NOT NULL,
  from_session INTEGER REFERENCES sessions(id),
  to_name      TEXT    NOT NULL,
  task_id      TEXT,
  kind         TEXT    NOT NULL,         -- handoff | progress
  body         TEXT    NOT NULL,
  read         INTEGER
);
CREATE INDEX messages_to ON messages(to_name, read);

CREATE TABLE audit (
  id          INTEGER PRIMARY KEY,
  at          INTEGER NOT NULL,
  session_id  INTEGER,
  actor       TEXT    NOT NULL,          -- agent | person | system
  agent       TEXT    NOT NULL DEFAULT '',
  action      TEXT    NOT NULL,
  task_id     TEXT    NOT NULL DEFAULT '',
  args_digest TEXT    NOT NULL DEFAULT '',
  outcome     TEXT    NOT NULL,
  detail      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_task ON audit(task_id, at);

CREATE TABLE meta (
  k TEXT PRIMARY KEY,
  v TEXT NOT NULL
) WITHOUT ROWID;
