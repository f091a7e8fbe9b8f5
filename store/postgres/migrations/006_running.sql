-- A running request keeps what it runs (the gate's intent, and a turn's
-- input and decision), so that when its instance stops while the tool
-- runs, the takeover records what may have acted; stale running requests
-- are found by when they were claimed.
ALTER TABLE requests ADD COLUMN running TEXT;
CREATE INDEX requests_running ON requests (claimed_at) WHERE state = 'running';
