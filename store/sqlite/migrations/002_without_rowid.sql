-- Sessions keyed by their id alone (WITHOUT ROWID): creating a session
-- writes one B-tree page instead of a table page and an index page. (The
-- audit table keeps its rowid: its rows arrive in time order, so a group of
-- commits appends to the same few pages whatever their sessions.)
CREATE TABLE sessions_new (
    id      TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    state   TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO sessions_new SELECT id, version, state FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
