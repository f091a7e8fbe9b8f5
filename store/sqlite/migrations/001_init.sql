-- Sessions, their audit chains, request results and confirmation tokens.
CREATE TABLE sessions (
    id      TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    state   TEXT NOT NULL          -- the session as JSON
);
CREATE TABLE audit (
    session TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    hash    TEXT NOT NULL,
    record  TEXT NOT NULL,         -- the sealed record as JSON
    PRIMARY KEY (session, seq)
);
CREATE TABLE results (
    request_id TEXT PRIMARY KEY,
    result     TEXT NOT NULL
);
CREATE TABLE confirmations (
    token        TEXT PRIMARY KEY,
    used         INTEGER NOT NULL DEFAULT 0,
    confirmation TEXT NOT NULL
);
