-- The configurations audit records name (their config member), kept by
-- digest: the SHA-256 of the canonical JSON stored as body (bytea: the
-- exact bytes, which jsonb would not keep). Written once per digest.
CREATE TABLE IF NOT EXISTS configs (
    digest  TEXT PRIMARY KEY,
    body    BYTEA NOT NULL,
    created BIGINT NOT NULL
);
