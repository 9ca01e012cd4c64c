-- A lease row exists for every task a clone has published as ready, not
-- only for those ever claimed: a task never claimed is free at epoch 0.
-- Claim-next then picks and takes a free row in one statement, skipping
-- the rows another grant has locked (FOR UPDATE SKIP LOCKED).
INSERT INTO leases (workspace, task_id, key, epoch, state)
SELECT c.workspace, r.task_id, r.key, 0, 'free' FROM ready r JOIN clones c ON c.id = r.clone
ON CONFLICT (workspace, task_id) DO NOTHING;
