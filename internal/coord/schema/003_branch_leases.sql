-- The advisory write lease of a branch's decision graph: one agent
-- writes the graph of a branch at a time, across every clone.
CREATE TABLE branch_leases (
  workspace bigint NOT NULL REFERENCES workspaces,
  branch    text NOT NULL,
  clone     bigint NOT NULL,
  session   bigint NOT NULL,
  holder    text NOT NULL,
  expires   timestamptz NOT NULL,
  PRIMARY KEY (workspace, branch)
);
