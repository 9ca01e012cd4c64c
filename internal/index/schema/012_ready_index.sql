-- snag.db, version 12: the ready tasks in claim order, with every column a
-- publication of them reads (ReadyRows: id, key, wave, sev_rank, created,
-- n as the rowid, and the status, state and dup its WHERE names), so that
-- listing the few thousand ready tasks of a big project walks one index
-- instead of seeking each task's row. Only open, clean, unique tasks are
-- in it.
CREATE INDEX tasks_ready ON tasks(wave, sev_rank, created, id, key, status, state, dup) WHERE status = 'open' AND state = 'ok' AND dup = 0;
