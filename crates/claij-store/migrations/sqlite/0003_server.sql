-- claij store schema 3 (SQLite): what `claij serve` keeps beside the runs.
--
-- Resume links (/hooks/SECRET): kept as the SHA-256 of the secret, never the secret,
-- with the run and the wait it answers (the run's trail length when the link was made).
-- Once the run moves on, the link answers nothing.
CREATE TABLE hooks (
    token_hash TEXT   NOT NULL PRIMARY KEY,
    run_id     TEXT   NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    wait_seq   BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE INDEX hooks_run ON hooks (run_id, wait_seq);

-- Completion callbacks: the URL a run's events are posted to (kept before the run is
-- created, so no foreign key; pruned with the run), and each delivery with the outcome of
-- its last attempt. Pending deliveries are taken up again after a restart.
CREATE TABLE callbacks (
    run_id     TEXT   NOT NULL PRIMARY KEY,
    url        TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE deliveries (
    id          TEXT   NOT NULL PRIMARY KEY,
    run_id      TEXT   NOT NULL,
    url         TEXT   NOT NULL,
    kind        TEXT   NOT NULL,
    payload     TEXT   NOT NULL,
    attempts    BIGINT NOT NULL,
    status      TEXT   NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    last_status BIGINT,
    last_error  TEXT,
    next_at     BIGINT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE INDEX deliveries_run ON deliveries (run_id, created_at);
CREATE INDEX deliveries_pending ON deliveries (status, next_at);
