-- Sessions belong to a principal (their owner) and are listed by owner,
-- newest first; sessions stored before this version belong to nobody.
-- A finished request remembers the audit record it produced, so a retried
-- turn is answered with the recorded one.
ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN created INTEGER NOT NULL DEFAULT 0;   -- Unix nanoseconds
CREATE INDEX sessions_by_owner ON sessions (owner, created, id);
ALTER TABLE requests ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
