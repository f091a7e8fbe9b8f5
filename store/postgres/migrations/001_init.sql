-- Sessions, their audit chains, request results and confirmation tokens.
CREATE TABLE sessions (
    id      TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    state   JSONB NOT NULL
);
CREATE TABLE audit (
    session TEXT NOT NULL,
    seq     BIGINT NOT NULL,
    hash    TEXT NOT NULL,
    record  TEXT NOT NULL,          -- exact bytes: the hash covers them
    PRIMARY KEY (session, seq)
);
CREATE TABLE results (
    request_id TEXT PRIMARY KEY,
    result     JSONB NOT NULL
);
CREATE TABLE confirmations (
    token        TEXT PRIMARY KEY,
    used         BOOLEAN NOT NULL DEFAULT FALSE,
    confirmation JSONB NOT NULL
);
