// Package killtest holds the tests that kill agentplane with SIGKILL while
// it works — taking turns, running workflows, delivering notifications —
// and restart it on the same database: nothing it acknowledged is lost,
// nothing acts twice, and the database opens cleanly. It has no code of
// its own; the tests run the binary (internal/testkit/servetest).
package killtest
