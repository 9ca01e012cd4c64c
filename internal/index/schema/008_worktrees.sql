-- snag.db, version 8: a lease may have a git worktree of its own, where
-- its agent works and its verify runs (snag_claim with worktree).
ALTER TABLE leases ADD COLUMN worktree TEXT NOT NULL DEFAULT '';
