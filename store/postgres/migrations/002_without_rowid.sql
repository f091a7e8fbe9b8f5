-- Version 2 rebuilt SQLite's sessions table WITHOUT ROWID.
-- PostgreSQL's tables need no change; the version is kept in step.
SELECT 1;
