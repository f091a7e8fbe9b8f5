#!/usr/bin/env bash
# Runs the official MCP conformance suite and the MCP Inspector CLI against
# agentplane: (a) `agentplane serve`'s /mcp — the scenarios that need none
# of the suite's fixtures (the others call tools, prompts and resources by
# the suite's names: test_simple_text, test://static-text, …), and the
# Inspector lists and calls its tools, lists and reads its resources and
# lists and gets its prompts (HTTP and stdio); (b) the fixture server
# (internal/testkit/mcpconformance, the same MCP server code and transport with
# the suite's fixture tools, resources and prompts beside agentplane's) —
# the full profile, the pending scenarios included, and the tools profile.
# MCP_SCRIPTS is the directory holding conformance.sh and inspector.sh
# (they install Node 22 and the suite into the cache MCP_TOOLS, by default
# $TMPDIR/mcp-tools). Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MCP_SCRIPTS:?set MCP_SCRIPTS to the directory holding conformance.sh and inspector.sh}"
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/agentplane" ./cmd/agentplane
go build -o "$tmp/mcpconformance" ./internal/testkit/mcpconformance
"$tmp/agentplane" serve --addr 127.0.0.1:18080 --db "$tmp/serve.db" >"$tmp/serve.log" 2>&1 &
"$tmp/mcpconformance" --addr 127.0.0.1:18081 >"$tmp/fixtures.log" 2>&1 &
sleep 1
echo "== agentplane serve /mcp: fixture-free scenarios"
"$MCP_SCRIPTS/conformance.sh" --scenario server-initialize --scenario ping --scenario logging-set-level \
  --scenario tools-list --scenario resources-list --scenario prompts-list --scenario server-sse-multiple-streams \
  --scenario dns-rebinding-protection http://127.0.0.1:18080/mcp | tail -1
echo "== Inspector: agentplane serve /mcp"
"$MCP_SCRIPTS/inspector.sh" --call agent_list_modes http://127.0.0.1:18080/mcp | tail -2
"$MCP_SCRIPTS/inspector.sh" --call workflow_execute --args '{"tasks":[{"id":"a","tool":"catalog_search","args":{"catalog_id":"modes","query":"sales"}}]}' \
  http://127.0.0.1:18080/mcp | tail -1
echo "== Inspector: agentplane serve /mcp resources and prompts"
. "$MCP_SCRIPTS/_tools.sh" && mcp_tools_install && mcp_inspector_env
insp=("$MCP_NODE" "$MCP_TOOLS/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js" --cli --format json -q --stored-auth-only --transport http)
for m in resources/list resources/templates/list prompts/list; do
  "${insp[@]}" --method "$m" http://127.0.0.1:18080/mcp | grep -o '"\(uri\|uriTemplate\|name\)":"[^"]*"' | tr '\n' ' '; echo
done
"${insp[@]}" --method resources/read --uri agentplane://catalogs/email_templates/items/TPL-123 http://127.0.0.1:18080/mcp | head -c 300; echo
"${insp[@]}" http://127.0.0.1:18080/mcp --method prompts/get --prompt-name general --prompt-args template_id=TPL-123 | head -c 300; echo
echo "== Inspector: agentplane mcp (stdio)"
"$MCP_SCRIPTS/inspector.sh" --call catalog_search --args '{"catalog_id":"modes","query":"sales"}' --stdio -- "$tmp/agentplane" mcp --db "$tmp/stdio.db" | tail -2
echo "== fixture server: the full profile, pending scenarios included"
"$MCP_SCRIPTS/conformance.sh" --suite all http://127.0.0.1:18081/mcp | tail -1
echo "== fixture server: the tools profile"
"$MCP_SCRIPTS/conformance.sh" --profile tools http://127.0.0.1:18081/mcp | tail -1
