-- Idempotency keys are scoped to a session and a principal, and claimed
-- before anything runs: a running request holds its key until it is done.
-- Results recorded under global request ids before this version are dropped
-- (their requests can no longer be retried).
DROP TABLE results;
CREATE TABLE requests (
    session    TEXT NOT NULL,
    principal  TEXT NOT NULL,
    request_id TEXT NOT NULL,
    digest     TEXT NOT NULL,       -- SHA-256 of the invocation: action and canonical arguments
    state      TEXT NOT NULL,       -- running | done
    result     TEXT,                -- the result as JSON, once done
    claimed_at INTEGER NOT NULL,    -- Unix nanoseconds
    PRIMARY KEY (session, principal, request_id)
) WITHOUT ROWID;
-- Confirmation tokens are kept as their SHA-256 digests; tokens issued
-- before this version are dropped (they expire within minutes anyway).
DELETE FROM confirmations;
ALTER TABLE confirmations RENAME COLUMN token TO digest;
-- Subsystems' tables (store.Extension) and the version each is at.
CREATE TABLE schema_extensions (
    name    TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
