-- The answers of catalog providers that decisions name (their sources
-- member), kept by version: "sha256:" and the SHA-256 of the items'
-- canonical JSON stored as body (bytea: the exact bytes, which jsonb
-- would not keep). Written once per version.
CREATE TABLE IF NOT EXISTS catalog_versions (
    version TEXT PRIMARY KEY,
    body    BYTEA NOT NULL,
    created BIGINT NOT NULL
);
