-- snag.db, version 4: the inode and status change time of each task file
-- beside its size and modification time, so that a scan can tell a file
-- unchanged without reading it (queue.Stamp). A ctime of 0 is a stamp not
-- to trust: the file is read and hashed at the next scan.

ALTER TABLE tasks ADD COLUMN ino INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN ctime INTEGER NOT NULL DEFAULT 0;
