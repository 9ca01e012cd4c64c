-- snag.db, version 2: indexes for lookups that otherwise read every task row.
-- The next alias number is max(key_num); the problem list and its count are
-- the few rows that are not clean tasks.

CREATE INDEX tasks_key_num ON tasks(key_num);
CREATE INDEX tasks_problems ON tasks(path) WHERE state != 'ok' OR dup = 1;
