-- claij store schema 2 (PostgreSQL): resume links.
--
-- A link to answer a waiting run (`claij serve`'s /hooks/TOKEN) is kept as the SHA-256 of
-- its secret, never the secret itself, with the run and the wait it answers: the run's
-- trail length when the link was made. Once the run moves on, the link answers nothing.

CREATE TABLE hooks (
    token_hash TEXT   NOT NULL PRIMARY KEY,
    run_id     TEXT   NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    wait_seq   BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE INDEX hooks_run ON hooks (run_id, wait_seq);
