-- snag.db, version 3: verify runs, and the project root a session works in.
-- A run is queued when a task goes to verifying, started when a verifier
-- takes it, and ended with its outcome. A run that a daemon's exit cut off
-- has no end: the next snagd ends it as interrupted and queues a new one.

CREATE TABLE verify_runs (
  id         INTEGER PRIMARY KEY,
  task_id    TEXT    NOT NULL,
  queued     INTEGER NOT NULL,           -- unix nanoseconds
  started    INTEGER,
  ended      INTEGER,
  verifier   TEXT    NOT NULL,           -- command | browser
  command    TEXT    NOT NULL DEFAULT '', -- the command line, or the URL the browser opens
  dir        TEXT    NOT NULL DEFAULT '', -- where a command runs
  session_id INTEGER,                    -- who resolved it, when an agent did
  holder     TEXT    NOT NULL DEFAULT '',
  outcome    TEXT    NOT NULL DEFAULT '', -- pass | fail | inconclusive | needs_approval | interrupted
  reason     TEXT    NOT NULL DEFAULT '',
  shot       TEXT    NOT NULL DEFAULT ''  -- a screenshot the run took, relative to .snag/
);
CREATE INDEX verify_runs_task ON verify_runs(task_id, id);
CREATE INDEX verify_runs_open ON verify_runs(id) WHERE ended IS NULL;

ALTER TABLE sessions ADD COLUMN root TEXT NOT NULL DEFAULT '';
