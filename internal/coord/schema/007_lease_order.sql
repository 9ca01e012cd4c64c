-- Claim-next walks the free leases in the queue's order and takes the
-- first whose task this clone has ready. It used to walk the clone's ready
-- rows instead, and so stepped over every task done or held elsewhere:
-- a clone's files keep those ready until git brings the change, and a
-- grant late in a drain of 3,000 tasks read some 2,000 rows.
-- The order is the task's wave, severity and creation, as the clone that
-- last published the task has them.
ALTER TABLE leases
  ADD COLUMN wave     bigint NOT NULL DEFAULT 0,
  ADD COLUMN sev_rank bigint NOT NULL DEFAULT 0,
  ADD COLUMN created  bigint NOT NULL DEFAULT 0;

UPDATE leases l SET wave = r.wave, sev_rank = r.sev_rank, created = r.created
FROM ready r JOIN clones c ON c.id = r.clone
WHERE c.workspace = l.workspace AND r.task_id = l.task_id;

CREATE INDEX leases_free_order ON leases (workspace, wave, sev_rank, created, task_id) WHERE state = 'free';
