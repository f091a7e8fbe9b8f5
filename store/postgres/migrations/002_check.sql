-- A check that aborts the transaction it runs in: a commit sends its
-- statements in one round trip, and a failed version or token check there
-- undoes everything. (SQLite's version 2 rebuilt its sessions table.)
CREATE FUNCTION agentplane_check(ok boolean, code text, what text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT ok THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = what;
    END IF;
    RETURN ok;
END
$$;
