// A minimal stdio MCP server built with the official SDK (its low-level Server): one tool,
// read_host_file, that reads any path it is given with the server's own rights. Outside a sandbox
// it reads host files; under `cagent mcp wrap` it sees only the sandbox's view
// (tests/mcp_clients/wrap_test.mjs).

import fs from "node:fs";

import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const server = new Server(
  { name: "cagent-test-read-server", version: "1.0.0" },
  { capabilities: { tools: {} } },
);

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "read_host_file",
      description: "Read a file by absolute path",
      inputSchema: {
        type: "object",
        properties: { path: { type: "string", description: "absolute path" } },
        required: ["path"],
      },
      annotations: { readOnlyHint: true },
    },
  ],
}));

server.setRequestHandler(CallToolRequestSchema, async (req) => {
  if (req.params.name !== "read_host_file") {
    return { content: [{ type: "text", text: `no tool ${req.params.name}` }], isError: true };
  }
  const path = String(req.params.arguments?.path ?? "");
  try {
    return { content: [{ type: "text", text: fs.readFileSync(path, "utf8") }] };
  } catch (err) {
    return { content: [{ type: "text", text: `cannot read ${path}: ${err.code ?? err}` }],
      isError: true };
  }
});

await server.connect(new StdioServerTransport());
