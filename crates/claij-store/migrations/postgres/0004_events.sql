-- Events that start workflows: what `publish` states publish (written in the same
-- transaction as the publishing run's checkpoint: the outbox) and which FSMs subscribe to
-- which topics (their documents' `triggers`). Workers claim pending events, start one run
-- per subscribed FSM whose trigger the event satisfies (each under the idempotency key
-- `event:ID:FSM`, so a dispatch made again after a crash starts nothing twice), and
-- settle them: `dispatched`, or `unmatched` (kept, with the reason).
CREATE TABLE events (
    id            TEXT   NOT NULL PRIMARY KEY,
    topic         TEXT   NOT NULL,
    event         TEXT   NOT NULL,
    run_id        TEXT   NOT NULL,
    status        TEXT   NOT NULL CHECK (status IN ('pending', 'dispatched', 'unmatched')),
    runs          TEXT,
    note          TEXT,
    claimed_by    TEXT,
    claimed_until BIGINT,
    created_at    BIGINT NOT NULL,
    settled_at    BIGINT
);

CREATE INDEX events_pending ON events (created_at) WHERE status = 'pending';
CREATE INDEX events_status ON events (status, created_at);

CREATE TABLE subscriptions (
    topic      TEXT   NOT NULL,
    fsm_id     TEXT   NOT NULL,
    version    BIGINT NOT NULL,
    hash       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (topic, fsm_id)
);
