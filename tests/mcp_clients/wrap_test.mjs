// `cagent mcp wrap` around MCP servers nobody here wrote, driven by the official SDK client:
//
//   node wrap_test.mjs CASE
//
// Cases (each with its twin: the same server without wrap, where the guarded effect happens):
//   denied   server-everything's gzip-file-as-resource is denied by `deny mcp:…`: isError naming
//            the rule, and the server never ran it (the session resource it would have registered
//            is not in resources/list); the denial is in wrap's audit log
//   allowed  server-everything's echo relays through wrap; its get-env, allowed, does not see a
//            variable planted in cagent's environment (the sandbox's environment is scrubbed)
//   planted  an SDK-built server (servers/read_server.mjs) whose allowed tool reads any path
//            cannot read a planted host file outside the workspace; it can read the workspace

import fs from "node:fs";
import path from "node:path";

import {
  CAGENT,
  CLIENTS_DIR,
  EVERYTHING,
  check,
  profile,
  readEvents,
  requireCagent,
  requireClients,
  runCases,
  sessionDirsUnder,
  tempDir,
} from "./lib/harness.mjs";

requireClients(["@modelcontextprotocol/sdk", "@modelcontextprotocol/server-everything"]);
requireCagent("wrap");

const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");

const READ_SERVER = path.join(CLIENTS_DIR, "servers", "read_server.mjs");
const PLANTED_VAR = "CAGENT_MCP_PLANTED_TOKEN";
const PLANTED_VALUE = "planted-env-value-5c1e";

// Connects the SDK client to SERVER (argv), wrapped by cagent when `wrapped`.
async function connect(server, { wrapped, state }) {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME ?? "/root", LANG: "C.UTF-8",
    [PLANTED_VAR]: PLANTED_VALUE };
  if (state) env.XDG_STATE_HOME = state;
  const [command, ...args] = wrapped
    ? [CAGENT, "mcp", "wrap", "--profile", profile("wrap"), "--workspace", CLIENTS_DIR, "--",
      ...server]
    : server;
  const transport = new StdioClientTransport({ command, args, env, stderr: "pipe", cwd: CLIENTS_DIR });
  let stderr = "";
  transport.stderr.on("data", (d) => (stderr += d));
  const client = new Client({ name: "cagent-e2e-wrap", version: "1.0.0" }, { capabilities: {} });
  try {
    await client.connect(transport);
  } catch (err) {
    throw new Error(`connecting to ${[command, ...args].join(" ")} failed: ${err}\n${stderr}`);
  }
  return { client, stderr: () => stderr, close: () => client.close().catch(() => {}) };
}

function text(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

const EVERYTHING_ARGV = [process.execPath, EVERYTHING, "stdio"];

// gzip-file-as-resource with a data: URL (no network needed): it registers a session resource
// named `name`, so resources/list shows whether the server ran it.
async function gzipAndList(client, name) {
  const result = await client.callTool({
    name: "gzip-file-as-resource",
    arguments: { name, data: "data:text/plain;base64,aGVsbG8=", outputType: "resourceLink" },
  });
  const { resources } = await client.listResources();
  return { result, registered: resources.some((r) => r.name === name || r.uri.endsWith(name)) };
}

const cases = {
  async denied() {
    const twin = await connect(EVERYTHING_ARGV, { wrapped: false });
    try {
      const direct = await gzipAndList(twin.client, "twin.gz");
      check(direct.result.isError !== true && direct.registered,
        "twin: without wrap the tool runs and registers its resource", direct);
    } finally {
      await twin.close();
    }
    const state = tempDir("state");
    const w = await connect(EVERYTHING_ARGV, { wrapped: true, state });
    try {
      const wrapped = await gzipAndList(w.client, "wrapped.gz");
      check(wrapped.result.isError === true, "under wrap the denied tool is refused with isError",
        wrapped.result);
      check(/gzip-file-as-resource/.test(text(wrapped.result)),
        "the refusal names the rule (mcp:gzip-file-as-resource)", wrapped.result);
      check(!wrapped.registered, "the server never ran it (no resource registered)", wrapped);
      const echo = await w.client.callTool({ name: "echo", arguments: { message: "still here" } });
      check(text(echo) === "Echo: still here", "the session goes on after the denial", echo);
    } finally {
      await w.close();
    }
    const dirs = sessionDirsUnder(state);
    check(dirs.length === 1, "wrap left one session directory", dirs);
    const events = readEvents(dirs[0]).map((e) => JSON.stringify(e));
    check(events.some((e) => e.includes("gzip-file-as-resource") && /deny/i.test(e)),
      "the denial is in wrap's audit log", events);
    check(events.some((e) => e.includes("echo")), "the allowed call is audited too", events);
  },

  async allowed() {
    const twin = await connect(EVERYTHING_ARGV, { wrapped: false });
    try {
      const { tools } = await twin.client.listTools();
      check(tools.some((t) => t.name === "gzip-file-as-resource"),
        "twin: without wrap the server lists gzip-file-as-resource", tools.map((t) => t.name));
      const env = await twin.client.callTool({ name: "get-env", arguments: {} });
      check(text(env).includes(PLANTED_VALUE), "twin: without wrap get-env shows the planted var",
        env);
    } finally {
      await twin.close();
    }
    const w = await connect(EVERYTHING_ARGV, { wrapped: true, state: tempDir("state") });
    try {
      const { tools } = await w.client.listTools();
      check(tools.some((t) => t.name === "echo"), "tools/list relays the server's tools", tools);
      check(!tools.some((t) => t.name === "gzip-file-as-resource"),
        "tools/list leaves out the tool the profile denies", tools.map((t) => t.name));
      const echo = await w.client.callTool({ name: "echo", arguments: { message: "relayed" } });
      check(echo.isError !== true && text(echo) === "Echo: relayed", "echo relays through wrap",
        echo);
      const env = await w.client.callTool({ name: "get-env", arguments: {} });
      check(env.isError !== true, "get-env is allowed", env);
      check(!text(env).includes(PLANTED_VALUE),
        "under wrap the server does not see the planted variable", env);
    } finally {
      await w.close();
    }
  },

  async planted() {
    const dir = tempDir("planted");
    const planted = path.join(dir, "host-secret.txt");
    fs.writeFileSync(planted, "planted host secret 9d2b\n");
    const inWorkspace = path.join(CLIENTS_DIR, "package.json");
    const argv = [process.execPath, READ_SERVER];

    const twin = await connect(argv, { wrapped: false });
    try {
      const r = await twin.client.callTool({ name: "read_host_file", arguments: { path: planted } });
      check(text(r).includes("planted host secret 9d2b"),
        "twin: without wrap the server reads the planted host file", r);
    } finally {
      await twin.close();
    }
    const w = await connect(argv, { wrapped: true, state: tempDir("state") });
    try {
      const r = await w.client.callTool({ name: "read_host_file", arguments: { path: planted } });
      check(!text(r).includes("planted host secret"),
        "under wrap the planted host file cannot be read", r);
      check(r.isError === true, "the read fails inside the sandbox", r);
      const ok = await w.client.callTool({
        name: "read_host_file",
        arguments: { path: inWorkspace },
      });
      check(ok.isError !== true && text(ok).includes("cagent-mcp-clients"),
        "the same tool reads the workspace (it runs, confined)", ok);
    } finally {
      await w.close();
    }
  },
};

await runCases(cases);
