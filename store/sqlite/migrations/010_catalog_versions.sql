-- The answers of catalog providers that decisions name (their sources
-- member), kept by version: "sha256:" and the SHA-256 of the items'
-- canonical JSON stored as body. Written once per version (a provider
-- answering the same items again writes nothing more). IF NOT EXISTS:
-- the migration may be numbered differently on a branch.
CREATE TABLE IF NOT EXISTS catalog_versions (
    version TEXT PRIMARY KEY,
    body    BLOB NOT NULL,
    created INTEGER NOT NULL
);
