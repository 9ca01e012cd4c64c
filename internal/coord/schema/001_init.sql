-- The live state that the clones of one repository share. Every row
-- belongs to a workspace (the normalised origin URL): workspaces in one
-- database never see each other's rows.

CREATE TABLE workspaces (
  id      bigserial PRIMARY KEY,
  name    text NOT NULL UNIQUE,
  created timestamptz NOT NULL DEFAULT now()
);

-- A clone is one snagd, in one worktree of one clone of the repository,
-- on one machine. It heartbeats (seen); one silent past the grace is
-- ended by any other, and its sessions, leases and claims with it.
CREATE TABLE clones (
  id         bigserial PRIMARY KEY,
  workspace  bigint NOT NULL REFERENCES workspaces,
  host       text NOT NULL,
  root       text NOT NULL,
  branch     text NOT NULL DEFAULT '',
  version    text NOT NULL DEFAULT '',
  started    timestamptz NOT NULL DEFAULT now(),
  seen       timestamptz NOT NULL DEFAULT now(),
  ended      timestamptz,
  end_reason text NOT NULL DEFAULT ''
);
CREATE INDEX clones_live ON clones (workspace) WHERE ended IS NULL;

-- A session is an agent's, kept by its clone's snagd under the id that
-- snagd gave it.
CREATE TABLE sessions (
  clone      bigint NOT NULL REFERENCES clones,
  id         bigint NOT NULL,
  workspace  bigint NOT NULL REFERENCES workspaces,
  name       text NOT NULL,
  client     text NOT NULL DEFAULT '',
  branch     text NOT NULL DEFAULT '',
  started    timestamptz NOT NULL DEFAULT now(),
  ended      timestamptz,
  end_reason text NOT NULL DEFAULT '',
  PRIMARY KEY (clone, id)
);

-- One row per task that was ever claimed: held (by a session of a clone,
-- under epoch), free (released: the next grant moves the epoch on) or
-- done (resolved: no clone may claim it until a person reopens it).
CREATE TABLE leases (
  workspace bigint NOT NULL REFERENCES workspaces,
  task_id   text NOT NULL,
  key       text NOT NULL DEFAULT '',
  epoch     bigint NOT NULL,
  state     text NOT NULL CHECK (state IN ('held', 'free', 'done')),
  clone     bigint,
  session   bigint,
  holder    text NOT NULL DEFAULT '',
  updated   timestamptz NOT NULL DEFAULT now(),
  why       text NOT NULL DEFAULT '',
  PRIMARY KEY (workspace, task_id)
);
CREATE INDEX leases_clone ON leases (clone) WHERE state = 'held';

-- The tasks each clone's files say are ready, in the queue's order:
-- claim-next picks among its own clone's rows.
CREATE TABLE ready (
  clone     bigint NOT NULL REFERENCES clones ON DELETE CASCADE,
  task_id   text NOT NULL,
  key       text NOT NULL,
  wave      bigint NOT NULL,
  sev_rank  bigint NOT NULL,
  created   bigint NOT NULL,
  PRIMARY KEY (clone, task_id)
);
CREATE INDEX ready_order ON ready (clone, wave, sev_rank, created, task_id);

-- The next alias number of each kind (task: SNAG-n, note: N-n).
CREATE TABLE aliases (
  workspace bigint NOT NULL REFERENCES workspaces,
  kind      text NOT NULL,
  next      bigint NOT NULL,
  PRIMARY KEY (workspace, kind)
);

-- The shared audit log.
CREATE TABLE audit (
  id        bigserial PRIMARY KEY,
  workspace bigint NOT NULL REFERENCES workspaces,
  clone     bigint,
  at        timestamptz NOT NULL DEFAULT now(),
  session   bigint NOT NULL DEFAULT 0,
  actor     text NOT NULL DEFAULT '',
  agent     text NOT NULL DEFAULT '',
  action    text NOT NULL,
  task_id   text NOT NULL DEFAULT '',
  outcome   text NOT NULL DEFAULT '',
  detail    text NOT NULL DEFAULT '',
  branch    text NOT NULL DEFAULT ''
);
CREATE INDEX audit_ws ON audit (workspace, id);
