-- claij store schema 1 (PostgreSQL). Timestamps are BIGINT microseconds since the Unix
-- epoch; JSON is stored as TEXT exactly as serialized: JSONB would reorder keys (the
-- trail's events must read back as written) and costs more bytes per row.

CREATE TABLE definitions (
    fsm_id     TEXT   NOT NULL,
    version    BIGINT NOT NULL,
    hash       TEXT   NOT NULL,
    document   TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (fsm_id, version, hash)
);

CREATE TABLE runs (
    id                  TEXT    NOT NULL PRIMARY KEY,
    fsm_id              TEXT    NOT NULL,
    version             BIGINT  NOT NULL,
    hash                TEXT    NOT NULL,
    parent_id           TEXT,
    status              TEXT    NOT NULL
        CHECK (status IN ('running', 'suspended', 'completed', 'failed', 'interrupted')),
    state               TEXT    NOT NULL,
    context             TEXT    NOT NULL,
    trail_len           BIGINT  NOT NULL,
    wait                TEXT,
    lease_owner         TEXT,
    lease_until         BIGINT,
    interrupt_requested BOOLEAN NOT NULL DEFAULT FALSE,
    created_at          BIGINT  NOT NULL,
    updated_at          BIGINT  NOT NULL,
    FOREIGN KEY (fsm_id, version, hash) REFERENCES definitions (fsm_id, version, hash)
);

CREATE INDEX runs_status_updated ON runs (status, updated_at);
CREATE INDEX runs_fsm ON runs (fsm_id);
CREATE INDEX runs_created ON runs (created_at);

-- One row per trail entry: commits append, nothing rewrites history.
CREATE TABLE trail (
    run_id TEXT   NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    BIGINT NOT NULL,
    entry  TEXT   NOT NULL,
    PRIMARY KEY (run_id, seq)
);
