-- snag.db, version 9: the decision graph.
--
-- Notes are read from every worktree of the repository snagd serves, so
-- agents on parallel branches read each other's notes before a merge: a
-- row is one file in one worktree (tree is '' for snagd's own, else the
-- worktree's top folder), and a note in several worktrees (after a merge,
-- or a branch made from another) has one row in each. The table is an
-- index of the files, so it is made again rather than altered.
DROP TRIGGER notes_fts_ai;
DROP TRIGGER notes_fts_ad;
DROP TRIGGER notes_fts_au;
DROP TABLE notes_fts;
DROP TABLE notes;

CREATE TABLE notes (
  n       INTEGER PRIMARY KEY,
  tree    TEXT    NOT NULL DEFAULT '',
  path    TEXT    NOT NULL,            -- relative to .snag/: notes/<name>
  size    INTEGER NOT NULL,
  mtime   INTEGER NOT NULL,
  id      TEXT    NOT NULL DEFAULT '',
  key     TEXT    NOT NULL DEFAULT '', -- N-<n>
  key_num INTEGER NOT NULL DEFAULT 0,
  type    TEXT    NOT NULL DEFAULT '',
  title   TEXT    NOT NULL DEFAULT '',
  branch  TEXT    NOT NULL DEFAULT '',
  commit_ TEXT    NOT NULL DEFAULT '',
  trust   TEXT    NOT NULL DEFAULT '',
  author  TEXT    NOT NULL DEFAULT '',
  created INTEGER NOT NULL DEFAULT 0,
  tasks   TEXT    NOT NULL DEFAULT '', -- space-separated
  files   TEXT    NOT NULL DEFAULT '', -- space-separated
  body    TEXT    NOT NULL DEFAULT '',
  error   TEXT    NOT NULL DEFAULT '', -- why the file does not parse
  UNIQUE (tree, path)
);
CREATE INDEX notes_created ON notes(created);
CREATE INDEX notes_id ON notes(id);
CREATE INDEX notes_key ON notes(key);

-- The edges, as the notes' links: fields hold them.
CREATE TABLE note_links (
  note  INTEGER NOT NULL REFERENCES notes(n) ON DELETE CASCADE,
  pos   INTEGER NOT NULL,
  to_   TEXT    NOT NULL, -- a key or an id, as written
  kind  TEXT    NOT NULL,
  why   TEXT    NOT NULL DEFAULT '',
  trust TEXT    NOT NULL DEFAULT '', -- '' for the note's own
  PRIMARY KEY (note, pos)
);
CREATE INDEX note_links_to ON note_links(to_);

CREATE VIRTUAL TABLE notes_fts USING fts5(
  title, body, files,
  content='notes', content_rowid='n', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER notes_fts_ai AFTER INSERT ON notes BEGIN
  INSERT INTO notes_fts(rowid, title, body, files) VALUES (new.n, new.title, new.body, new.files);
END;
CREATE TRIGGER notes_fts_ad AFTER DELETE ON notes BEGIN
  INSERT INTO notes_fts(notes_fts, rowid, title, body, files) VALUES ('delete', old.n, old.title, old.body, old.files);
END;
CREATE TRIGGER notes_fts_au AFTER UPDATE ON notes BEGIN
  INSERT INTO notes_fts(notes_fts, rowid, title, body, files) VALUES ('delete', old.n, old.title, old.body, old.files);
  INSERT INTO notes_fts(rowid, title, body, files) VALUES (new.n, new.title, new.body, new.files);
END;

-- Advisory branch write leases: a graph write holds (workspace, branch)
-- for a few seconds, so two sessions writing notes on one branch hear of
-- each other. They lock nothing.
CREATE TABLE branch_leases (
  workspace  TEXT    NOT NULL,
  branch     TEXT    NOT NULL,
  session_id INTEGER NOT NULL,
  holder     TEXT    NOT NULL,
  taken      INTEGER NOT NULL,
  expires    INTEGER NOT NULL,
  PRIMARY KEY (workspace, branch)
);

-- The branch an action was taken on, for the activity by branch; and the
-- branch its session was last seen on (snagd reads it from the session's
-- worktree).
ALTER TABLE audit ADD COLUMN branch TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_branch ON audit(branch, at) WHERE branch != '';
ALTER TABLE sessions ADD COLUMN branch TEXT NOT NULL DEFAULT '';
