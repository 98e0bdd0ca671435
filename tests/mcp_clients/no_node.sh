#!/bin/sh
# The stand-in for an e2e-mcp case when cmake found no node: a skip that says why, or a failure
# under CAGENT_REQUIRE_MCP_CLIENTS=1 (CI).
echo "no node on PATH when cmake configured the build: the real-client MCP tests need Node.js and \`npm ci\` in tests/mcp_clients"
[ "${CAGENT_REQUIRE_MCP_CLIENTS:-}" = 1 ] && exit 1
exit 77
