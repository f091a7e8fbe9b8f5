-- A confirmation token issued with a session's pending confirmation is
-- found by its pending key (version:session) too: the human's "yes" uses it
-- up as the token itself would. Tokens are used up by the claim of the
-- invocation they confirm, before it runs, so concurrent confirmations of
-- one question run it once.
ALTER TABLE confirmations ADD COLUMN pending TEXT;
CREATE UNIQUE INDEX confirmations_pending ON confirmations (pending) WHERE pending IS NOT NULL;
