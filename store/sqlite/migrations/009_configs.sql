-- The configurations audit records name (their config member), kept by
-- digest: the SHA-256 of the canonical JSON stored as body. Written once
-- per digest (instances starting together, a reload back to an earlier
-- configuration write nothing more). IF NOT EXISTS: the migration may be
-- numbered differently on a branch.
CREATE TABLE IF NOT EXISTS configs (
    digest  TEXT PRIMARY KEY,
    body    BLOB NOT NULL,
    created INTEGER NOT NULL
);
