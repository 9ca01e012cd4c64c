-- snag.db, version 7: the notes (.snag/notes/*.md), indexed for search and
-- for the recent decisions. Like tasks, an index: rebuilt from the files,
-- brought in step with them before each read (DB.SyncNotes).

CREATE TABLE notes (
  n       INTEGER PRIMARY KEY,
  path    TEXT    NOT NULL UNIQUE, -- relative to .snag/: notes/<name>
  size    INTEGER NOT NULL,
  mtime   INTEGER NOT NULL,
  id      TEXT    NOT NULL DEFAULT '',
  key     TEXT    NOT NULL DEFAULT '', -- N-<n>
  key_num INTEGER NOT NULL DEFAULT 0,
  title   TEXT    NOT NULL DEFAULT '',
  kind    TEXT    NOT NULL DEFAULT '',
  trust   TEXT    NOT NULL DEFAULT '',
  author  TEXT    NOT NULL DEFAULT '',
  created INTEGER NOT NULL DEFAULT 0,
  tasks   TEXT    NOT NULL DEFAULT '', -- space-separated
  files   TEXT    NOT NULL DEFAULT '', -- space-separated
  body    TEXT    NOT NULL DEFAULT '',
  error   TEXT    NOT NULL DEFAULT ''  -- why the file does not parse
);
CREATE INDEX notes_created ON notes(kind, created);

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
