// Package oncetest holds TestEveryActingPathRunsOnce: every path by which
// a request reaches a tool that acts — a turn, a confirmation, an intent,
// an LLM proposal, MCP, the WebSocket, a workflow, an internal agent turn — sent
// by one, two and eight clients at once, on SQLite, on PostgreSQL and on
// two instances sharing it, with an instance killed while the tool runs:
// each acts once. It has no code of its own; the test runs the binary
// (internal/testkit/servetest).
package oncetest
