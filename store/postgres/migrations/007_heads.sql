-- Each session keeps the head of its audit chain (the last record's seq
-- and hash), written in the same statement as the record is appended, so
-- that a chain cut at its tail no longer verifies: its last record is not
-- the session's head.
ALTER TABLE sessions ADD COLUMN head_seq BIGINT NOT NULL DEFAULT 0, ADD COLUMN head_hash TEXT NOT NULL DEFAULT '';
UPDATE sessions s SET head_seq = a.seq, head_hash = a.hash
    FROM (SELECT DISTINCT ON (session) session, seq, hash FROM audit ORDER BY session, seq DESC) a
    WHERE a.session = s.id;
