-- A clone is known by its machine's identity as well as its host name and
-- folder: two containers with the same host name and path are two clones,
-- and neither takes over the other's row (and leases) when it starts.
-- identity is a random id kept in the repository's state folder
-- (.git/snag/clone-id); a row from before it is taken over by the first
-- clone of its host and folder that joins, which writes its identity in.
ALTER TABLE clones ADD COLUMN identity text NOT NULL DEFAULT '';
