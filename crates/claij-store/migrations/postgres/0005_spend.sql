-- claij store schema 5 (PostgreSQL): what each run spent, what it may spend, and the
-- model calls it has in flight.
--
-- The spend columns are the run's own totals (its trail's model calls: tokens, cost,
-- calls; its time running and waiting, in milliseconds). Every commit writes them in
-- place (the engine sends the run's totals, not a delta), so a commit made again after a
-- crash cannot count anything twice. A run tree's totals are summed over `parent_id`
-- (the index `runs_parent` of migration 3 serves it). `budget` is the JSON of what the
-- run and its children may spend together (NULL: no limit); `pending` the JSON of the
-- model calls a running run has in flight (what they can cost at most), forgotten by its
-- next commit: a run taken over after a crash finds them there and records them as spent.
ALTER TABLE runs
    ADD COLUMN input_tokens  BIGINT           NOT NULL DEFAULT 0,
    ADD COLUMN output_tokens BIGINT           NOT NULL DEFAULT 0,
    ADD COLUMN cost_usd      DOUBLE PRECISION NOT NULL DEFAULT 0,
    ADD COLUMN calls         BIGINT           NOT NULL DEFAULT 0,
    ADD COLUMN time_ms       BIGINT           NOT NULL DEFAULT 0,
    ADD COLUMN waiting_ms    BIGINT           NOT NULL DEFAULT 0,
    ADD COLUMN budget        TEXT,
    ADD COLUMN pending       TEXT;

-- The runs kept before this version: their tokens, cost and calls from their trails, as
-- claij-core's `Spend::of_entry` counts an entry (its usage, `calls` defaulting to 1; one
-- call without tokens for an entry that names a model but has no usage). Their times were
-- not recorded and stay 0. An entry that is not JSON (damaged) counts nothing: reading
-- the trail reports it. Only entries whose text mentions a usage or a model are parsed.
CREATE FUNCTION claij_entry_json(entry TEXT) RETURNS JSON
    LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
    RETURN entry::JSON;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;

UPDATE runs SET
    input_tokens = spent.input_tokens,
    output_tokens = spent.output_tokens,
    cost_usd = spent.cost_usd,
    calls = spent.calls
FROM (
    SELECT run_id,
        CAST(SUM(COALESCE((e -> 'usage' ->> 'input_tokens')::BIGINT, 0)) AS BIGINT)
            AS input_tokens,
        CAST(SUM(COALESCE((e -> 'usage' ->> 'output_tokens')::BIGINT, 0)) AS BIGINT)
            AS output_tokens,
        SUM(COALESCE((e -> 'usage' ->> 'cost_usd')::DOUBLE PRECISION, 0)) AS cost_usd,
        CAST(SUM(CASE
            WHEN json_typeof(e -> 'usage') = 'object'
                THEN COALESCE((e -> 'usage' ->> 'calls')::BIGINT, 1)
            WHEN e ->> 'model' IS NOT NULL THEN 1
            ELSE 0
        END) AS BIGINT) AS calls
    FROM (
        SELECT run_id, claij_entry_json(entry) AS e FROM trail
        WHERE entry LIKE '%"usage"%' OR entry LIKE '%"model"%'
    ) AS parsed
    WHERE json_typeof(e) = 'object'
    GROUP BY run_id
) AS spent
WHERE runs.id = spent.run_id;

DROP FUNCTION claij_entry_json(TEXT);
