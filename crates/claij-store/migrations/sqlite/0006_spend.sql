-- claij store schema 6 (SQLite): what each run spent, what it may spend, and the model
-- calls it has in flight.
--
-- The spend columns are the run's own totals (its trail's model calls: tokens, cost,
-- calls; its time running and waiting, in milliseconds). Every commit writes them in
-- place (the engine sends the run's totals, not a delta), so a commit made again after a
-- crash cannot count anything twice. A run tree's totals are summed over `parent_id`
-- (the index `runs_parent` of migration 4 serves it). `budget` is the JSON of what the
-- run and its children may spend together (NULL: no limit); `pending` the JSON of the
-- model calls a running run has in flight (what they can cost at most), forgotten by its
-- next commit: a run taken over after a crash finds them there and records them as spent.
ALTER TABLE runs ADD COLUMN input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN output_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN calls BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN time_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN waiting_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN budget TEXT;
ALTER TABLE runs ADD COLUMN pending TEXT;

-- The runs kept before this version: their tokens, cost and calls from their trails, as
-- claij-core's `Spend::of_entry` counts an entry (its usage, `calls` defaulting to 1; one
-- call without tokens for an entry that names a model but has no usage). Their times were
-- not recorded and stay 0. An entry that is not JSON (damaged) counts nothing: reading
-- the trail reports it.
UPDATE runs SET
    input_tokens = spent.input_tokens,
    output_tokens = spent.output_tokens,
    cost_usd = spent.cost_usd,
    calls = spent.calls
FROM (
    SELECT run_id,
        SUM(COALESCE(json_extract(entry, '$.usage.input_tokens'), 0)) AS input_tokens,
        SUM(COALESCE(json_extract(entry, '$.usage.output_tokens'), 0)) AS output_tokens,
        TOTAL(json_extract(entry, '$.usage.cost_usd')) AS cost_usd,
        SUM(CASE
            WHEN json_type(entry, '$.usage') = 'object'
                THEN COALESCE(json_extract(entry, '$.usage.calls'), 1)
            WHEN json_extract(entry, '$.model') IS NOT NULL THEN 1
            ELSE 0
        END) AS calls
    FROM trail
    WHERE json_valid(entry)
    GROUP BY run_id
) AS spent
WHERE runs.id = spent.run_id;

-- The checkpoint statement of migrations 2 and 4, now writing the run's spend in place of
-- the stored one and forgetting its pending calls (their entries are in).
DROP TRIGGER checkpoint_write;
DROP VIEW checkpoint_writes;

CREATE VIEW checkpoint_writes (
    run_id, owner, first_seq, status, state, context, wait, lease_until, updated_at, entries,
    wake_at, input_tokens, output_tokens, cost_usd, calls, time_ms, waiting_ms
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL WHERE 0;

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
        wake_at = NEW.wake_at,
        input_tokens = NEW.input_tokens,
        output_tokens = NEW.output_tokens,
        cost_usd = NEW.cost_usd,
        calls = NEW.calls,
        time_ms = NEW.time_ms,
        waiting_ms = NEW.waiting_ms,
        pending = NULL
    WHERE id = NEW.run_id AND lease_owner = NEW.owner
        AND (NEW.first_seq IS NULL OR trail_len = NEW.first_seq);
    SELECT RAISE(ABORT, 'claij: checkpoint refused') WHERE changes() = 0;
    INSERT INTO trail (run_id, seq, entry)
        SELECT NEW.run_id, json_extract(value, '$[0]'), json_extract(value, '$[1]')
        FROM json_each(NEW.entries);
END;
