-- snag.db, version 5: the columns a scan compares with the listing of
-- tasks/ (path, hash and stamp), in an index of their own, so a start on
-- unchanged files reads that index instead of every task row with its body.

CREATE INDEX tasks_stamp ON tasks(path, sha256, size, mtime, ino, ctime);
