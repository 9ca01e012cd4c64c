-- snag.db, version 10: a visual verify's pictures and figure. When a
-- captured task has the anchor's crop, the browser verifier takes the
-- same crop again and compares the two: before is the capture's crop,
-- after the fresh one, diff the picture of what changed, and changed the
-- fraction of the anchor's pixels that did (NULL: no comparison ran), and
-- identical whether the two look the same.
ALTER TABLE verify_runs ADD COLUMN before_shot TEXT NOT NULL DEFAULT '';
ALTER TABLE verify_runs ADD COLUMN after_shot  TEXT NOT NULL DEFAULT '';
ALTER TABLE verify_runs ADD COLUMN diff_shot   TEXT NOT NULL DEFAULT '';
ALTER TABLE verify_runs ADD COLUMN changed     REAL;
ALTER TABLE verify_runs ADD COLUMN identical   INTEGER NOT NULL DEFAULT 0;
