-- Each entry a clone sent names the log it came from (its view's
-- snag.db, by an id made with it) and its id there; 0 for the store's own
-- entries. A snagd sends what its log has after the last entry the store
-- took from it (AuditSent), so an entry written just before a crash is
-- not lost from the shared log, and none is sent twice.
ALTER TABLE audit ADD COLUMN log text NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN local bigint NOT NULL DEFAULT 0;
CREATE INDEX audit_local ON audit (log, local) WHERE local > 0;
