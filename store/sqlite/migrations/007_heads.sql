-- Each session keeps the head of its audit chain (the last record's seq
-- and hash), moved by a trigger in the same statement as the record is
-- appended, so that a chain cut at its tail no longer verifies: its last
-- record is not the session's head.
ALTER TABLE sessions ADD COLUMN head_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN head_hash TEXT NOT NULL DEFAULT '';
UPDATE sessions SET head_seq = COALESCE((SELECT max(seq) FROM audit WHERE audit.session = sessions.id), 0);
UPDATE sessions SET head_hash = COALESCE((SELECT hash FROM audit WHERE audit.session = sessions.id AND audit.seq = sessions.head_seq), '');
CREATE TRIGGER audit_head AFTER INSERT ON audit BEGIN
    UPDATE sessions SET head_seq = NEW.seq, head_hash = NEW.hash WHERE id = NEW.session;
END;
