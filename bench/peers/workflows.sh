#!/usr/bin/env bash
# Workflows side by side on this machine, in one run: agentplane's engine
# (workflow and approval benchmarks), LangGraph JS (none, MemorySaver,
# SqliteSaver) and Temporal (dev server; activities; an update as the
# approval), on the same DAG shapes: 3x1 (a chain of 3), 1x10 (10 at
# once), 5x4. Not in CI: it installs npm packages and builds the Temporal
# CLI (about 8 minutes, once, into ~/.cache/agentplane-peers).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${N:-200}
cache=${HOME}/.cache/agentplane-peers
mkdir -p "$cache"

echo "== agentplane"
go test ./workflow -run '^$' -bench 'BenchmarkWorkflow|BenchmarkGateCall' -benchtime 2s
go test ./httpapi -run '^$' -bench 'BenchmarkApprovalRoundTrip' -benchtime 2000x

echo "== LangGraph JS"
(cd bench/peers/langgraph && npm ci --no-audit --no-fund >/dev/null && npm rebuild better-sqlite3 >/dev/null && node bench.mjs -n "$N")

echo "== Temporal"
temporal=$cache/bin/temporal
if [ ! -x "$temporal" ]; then
	GOBIN=$cache/bin go install github.com/temporalio/cli/cmd/temporal@v1.5.1
fi
db=$(mktemp -d)
"$temporal" server start-dev --headless --port 7233 --ui-port 8233 --log-level error --db-filename "$db/temporal.db" \
	--dynamic-config-value matching.numTaskqueueReadPartitions=1 --dynamic-config-value matching.numTaskqueueWritePartitions=1 >"$db/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$db"' EXIT
for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/7233) 2>/dev/null && break; sleep 0.2; done
(cd bench/peers/temporal && go run . -addr 127.0.0.1:7233 -n "$N")
