-- snag.db, version 11: what a claim found and wrote. base is the task
-- file's bytes just before the claim rewrote it, wrote the SHA-256 (hex)
-- of the bytes the claim wrote. A file that git puts back as it was before
-- the claim (git stash, a checkout round trip, a merge) holds base again:
-- the lease holds (the file did not say it is free, git did); and a
-- release of a file that still holds the claim's bytes writes base back,
-- so a claim and a release that changed nothing leave git status clean.
ALTER TABLE leases ADD COLUMN base  BLOB;
ALTER TABLE leases ADD COLUMN wrote TEXT NOT NULL DEFAULT '';
