-- claij store schema 3 (PostgreSQL): the queue that `claij worker` processes share.
--
-- `wake_at` (microseconds) is when a run needs a worker without anyone asking: for a
-- queued run (running, held by no one) its scheduled start (NULL: at once); for a
-- suspended run the earlier of its wait's expiry and its deadline, or the largest BIGINT
-- while it waits for children (it is due when one of them ends). `idempotency_key` is the
-- key a run was submitted with: unique, so a second submission finds the first run.
-- Workers claim with `FOR UPDATE SKIP LOCKED` and are woken by `NOTIFY claij_work`.
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
