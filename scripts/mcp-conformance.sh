#!/usr/bin/env bash
# Runs the official MCP conformance suite and the MCP Inspector CLI against
# agentplane: (a) `agentplane serve`'s /mcp — the fixture-free scenarios,
# and the Inspector lists and calls its tools (HTTP and stdio); (b) the
# fixture server (internal/mcpconformance, the same MCP server code and
# transport with the suite's fixture tools) — the tools profile.
# MCP_TOOLS is the directory holding conformance.sh and inspector.sh (they
# install Node 22 and the suite into a cache). Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MCP_TOOLS:?set MCP_TOOLS to the directory holding conformance.sh and inspector.sh}"
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/agentplane" ./cmd/agentplane
go build -o "$tmp/mcpconformance" ./internal/mcpconformance
"$tmp/agentplane" serve --addr 127.0.0.1:18080 --db "$tmp/serve.db" >"$tmp/serve.log" 2>&1 &
"$tmp/mcpconformance" --addr 127.0.0.1:18081 >"$tmp/fixtures.log" 2>&1 &
sleep 1
echo "== agentplane serve /mcp: fixture-free scenarios"
"$MCP_TOOLS/conformance.sh" --scenario server-initialize --scenario ping --scenario logging-set-level \
  --scenario tools-list --scenario server-sse-multiple-streams --scenario dns-rebinding-protection http://127.0.0.1:18080/mcp | tail -1
echo "== Inspector: agentplane serve /mcp"
"$MCP_TOOLS/inspector.sh" --call agent_list_modes http://127.0.0.1:18080/mcp | tail -2
"$MCP_TOOLS/inspector.sh" --call workflow_execute --args '{"tasks":[{"id":"a","tool":"catalog_search","args":{"catalog_id":"modes","query":"sales"}}]}' \
  http://127.0.0.1:18080/mcp | tail -1
echo "== Inspector: agentplane mcp (stdio)"
"$MCP_TOOLS/inspector.sh" --call catalog_search --args '{"catalog_id":"modes","query":"sales"}' --stdio -- "$tmp/agentplane" mcp --db "$tmp/stdio.db" | tail -2
echo "== fixture server: the tools profile"
"$MCP_TOOLS/conformance.sh" --profile tools http://127.0.0.1:18081/mcp | tail -1
