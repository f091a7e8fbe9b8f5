-- Each session keeps the head of its audit chain (the last record's seq
-- and hash), so that a chain cut at its tail no longer verifies: its last
-- record is not the session's head. A commit that changes the session
-- writes the head with it; the trigger moves it in the statement that
-- appends a record alone (and finds nothing to do after the former).
ALTER TABLE sessions ADD COLUMN head_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN head_hash TEXT NOT NULL DEFAULT '';
UPDATE sessions SET head_seq = COALESCE((SELECT max(seq) FROM audit WHERE audit.session = sessions.id), 0);
UPDATE sessions SET head_hash = COALESCE((SELECT hash FROM audit WHERE audit.session = sessions.id AND audit.seq = sessions.head_seq), '');
CREATE TRIGGER audit_head AFTER INSERT ON audit BEGIN
    UPDATE sessions SET head_seq = NEW.seq, head_hash = NEW.hash WHERE id = NEW.session AND head_seq < NEW.seq;
END;
