-- File claims shared by the clones of a workspace: an agent's claim of
-- repository paths, folders or globs, exclusive or shared, until it is
-- released or its expiry passes.
CREATE TABLE file_claims (
  id        bigserial PRIMARY KEY,
  workspace bigint NOT NULL REFERENCES workspaces,
  clone     bigint NOT NULL REFERENCES clones,
  session   bigint NOT NULL,
  holder    text NOT NULL,
  path      text NOT NULL,
  task_id   text NOT NULL DEFAULT '',
  exclusive boolean NOT NULL,
  acquired  timestamptz NOT NULL DEFAULT now(),
  expires   timestamptz NOT NULL,
  released  timestamptz,
  why       text NOT NULL DEFAULT ''
);
CREATE INDEX file_claims_live ON file_claims (workspace) WHERE released IS NULL;
CREATE INDEX file_claims_session ON file_claims (clone, session) WHERE released IS NULL;
