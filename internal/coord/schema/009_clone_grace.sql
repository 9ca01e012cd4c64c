-- Each clone says how long it may stay silent (its grace, in
-- milliseconds), and is swept by that: a clone gives its leases up a
-- margin of heartbeats before its own grace ends, so the others must not
-- sweep it by a shorter one of theirs. 0 is a row from before: swept by
-- the sweeping clone's grace, as before.
ALTER TABLE clones ADD COLUMN grace_ms bigint NOT NULL DEFAULT 0;
