-- snag.db, version 6: team coordination on one machine.
--
-- File claims: a session may hold a path or a glob shared or exclusive;
-- shared claims of one path by several sessions live side by side, so the
-- one-live-row-per-path index goes. A claim is live while it is not
-- released and not past its expiry; the holder's name is kept, as a
-- lease's is, for the views after the session row has ended.
DROP INDEX file_claims_live;
ALTER TABLE file_claims ADD COLUMN holder     TEXT    NOT NULL DEFAULT '';
ALTER TABLE file_claims ADD COLUMN exclusive  INTEGER NOT NULL DEFAULT 1;
ALTER TABLE file_claims ADD COLUMN end_reason TEXT    NOT NULL DEFAULT '';
CREATE INDEX file_claims_live ON file_claims(path) WHERE released IS NULL;
CREATE UNIQUE INDEX file_claims_own ON file_claims(session_id, path) WHERE released IS NULL;

-- Messages: handoffs (to_name set) and reports (to everyone), with the
-- sender's name kept and a title for handoffs.
ALTER TABLE messages ADD COLUMN from_name TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN title     TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN detail    TEXT NOT NULL DEFAULT '';
CREATE INDEX messages_created ON messages(kind, created);

-- A session that asked for its name (SNAG_AGENT, or snag_context's name)
-- keeps it; one that was given a name may still adopt another once.
ALTER TABLE sessions ADD COLUMN asked INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sessions_ended ON sessions(ended) WHERE ended IS NOT NULL;
