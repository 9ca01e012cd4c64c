-- What a clone publishes to the others before git carries it: agents'
-- reports and handoffs, and the notes and inbox items added there (its
-- title, type, body, branch and author), so teammates read the reasoning
-- before it is merged.
CREATE TABLE messages (
  id        bigserial PRIMARY KEY,
  workspace bigint NOT NULL REFERENCES workspaces,
  clone     bigint NOT NULL,
  kind      text NOT NULL CHECK (kind IN ('report', 'handoff', 'note', 'inbox')),
  from_name text NOT NULL DEFAULT '',
  to_name   text NOT NULL DEFAULT '',
  key       text NOT NULL DEFAULT '',
  type      text NOT NULL DEFAULT '',
  title     text NOT NULL DEFAULT '',
  body      text NOT NULL DEFAULT '',
  branch    text NOT NULL DEFAULT '',
  created   timestamptz NOT NULL DEFAULT now(),
  seen      timestamptz
);
CREATE INDEX messages_kind ON messages (workspace, kind, id);
