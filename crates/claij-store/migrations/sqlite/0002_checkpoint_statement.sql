-- claij store schema 2 (SQLite): a checkpoint in one statement.
--
-- The committer writes a checkpoint as one INSERT into this view. Its trigger does what
-- the guarded UPDATE of `runs` and the INSERT into `trail` did as separate statements, so
-- a lone checkpoint is one statement (its own transaction: one round trip to the
-- database's thread, one fsync in strict mode) instead of four.
--
-- `entries` is a JSON array of `[seq, entry]` pairs, each entry the JSON text exactly as
-- stored (a JSON string, so json_extract gives back the very same text).
-- A checkpoint the guard refuses (lost lease, trail not ending at `first_seq`, unknown run)
-- aborts the statement with the message below and writes nothing; the committer then
-- asks why. ABORT undoes the statement only: the other checkpoints of a group stay.

CREATE VIEW checkpoint_writes (
    run_id, owner, first_seq, status, state, context, wait, lease_until, updated_at, entries
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0;

CREATE TRIGGER checkpoint_write INSTEAD OF INSERT ON checkpoint_writes
BEGIN
    UPDATE runs SET
        status = NEW.status,
        state = NEW.state,
        context = COALESCE(NEW.context, context),
        wait = NEW.wait,
        lease_owner = CASE WHEN NEW.lease_until IS NULL THEN NULL ELSE lease_owner END,
        lease_until = NEW.lease_until,
        trail_len = trail_len + json_array_length(NEW.entries),
        updated_at = NEW.updated_at
    WHERE id = NEW.run_id AND lease_owner = NEW.owner
        AND (NEW.first_seq IS NULL OR trail_len = NEW.first_seq);
    SELECT RAISE(ABORT, 'claij: checkpoint refused') WHERE changes() = 0;
    INSERT INTO trail (run_id, seq, entry)
        SELECT NEW.run_id, json_extract(value, '$[0]'), json_extract(value, '$[1]')
        FROM json_each(NEW.entries);
END;
