-- claij store schema 8 (SQLite): where a forked run came from.
--
-- `forked_from`: for a run made by `claij runs fork` (time travel), the run and trail
-- entry it was forked from, as JSON (`{"run": ID, "seq": N, "edited": BOOL}`); NULL for
-- every other run, those stored before this migration included.
ALTER TABLE runs ADD COLUMN forked_from TEXT;
