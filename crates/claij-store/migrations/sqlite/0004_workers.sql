-- claij store schema 4 (SQLite): the queue that `claij worker` processes share.
--
-- `wake_at` (microseconds) is when a run needs a worker without anyone asking: for a
-- queued run (running, held by no one) its scheduled start (NULL: at once); for a
-- suspended run the earlier of its wait's expiry and its deadline, or the largest BIGINT
-- while it waits for children (it is due when one of them ends). `idempotency_key` is the
-- key a run was submitted with: unique, so a second submission finds the first run.
ALTER TABLE runs ADD COLUMN wake_at BIGINT;
ALTER TABLE runs ADD COLUMN idempotency_key TEXT;

CREATE UNIQUE INDEX runs_idempotency_key ON runs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_wake ON runs (status, wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX runs_queued ON runs (created_at) WHERE status = 'running' AND lease_owner IS NULL;
CREATE INDEX runs_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX runs_lease_owner ON runs (lease_owner) WHERE lease_owner IS NOT NULL;

-- The worker processes: what `claij workers list` shows, and how a starting worker finds
-- the dead ones whose runs it can take over at once.
CREATE TABLE workers (
    id          TEXT    NOT NULL PRIMARY KEY,
    host        TEXT    NOT NULL,
    concurrency BIGINT  NOT NULL,
    holding     BIGINT  NOT NULL,
    started_at  BIGINT  NOT NULL,
    renewed_at  BIGINT  NOT NULL
);

-- The checkpoint statement of migration 2, now writing `wake_at` too.
DROP TRIGGER checkpoint_write;
DROP VIEW checkpoint_writes;

CREATE VIEW checkpoint_writes (
    run_id, owner, first_seq, status, state, context, wait, lease_until, updated_at, entries,
    wake_at
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0;

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
        updated_at = NEW.updated_at,
        wake_at = NEW.wake_at
    WHERE id = NEW.run_id AND lease_owner = NEW.owner
        AND (NEW.first_seq IS NULL OR trail_len = NEW.first_seq);
    SELECT RAISE(ABORT, 'claij: checkpoint refused') WHERE changes() = 0;
    INSERT INTO trail (run_id, seq, entry)
        SELECT NEW.run_id, json_extract(value, '$[0]'), json_extract(value, '$[1]')
        FROM json_each(NEW.entries);
END;
