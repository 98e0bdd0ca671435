// The MCP Inspector (@modelcontextprotocol/inspector) in CLI mode, listing and calling tools:
//
//   node inspector_test.mjs CASE
//
// Cases:
//   everything  the harness itself: tools/list and the echo tool of server-everything
//   list        tools/list of `cagent mcp serve` over stdio
//   call        tools/call read_file and run_command, and a refused read, over stdio
//   http        tools/list and tools/call over Streamable HTTP with the bearer token

import path from "node:path";

import {
  CAGENT,
  EVERYTHING,
  NODE_MODULES,
  check,
  makeWorkspace,
  profile,
  requireCagent,
  requireClients,
  run,
  runCases,
  tempDir,
} from "./lib/harness.mjs";

requireClients(["@modelcontextprotocol/inspector", "@modelcontextprotocol/server-everything"]);

const INSPECTOR = path.join(NODE_MODULES, "@modelcontextprotocol", "inspector", "clients",
  "launcher", "build", "index.js");

// Runs `inspector --cli ARGS…`; resolves to its JSON output. The inspector exits 5 when the tool's
// result has isError (it still prints the result).
async function inspector(args, { exit = 0 } = {}) {
  const home = tempDir("inspector-home");
  const r = await run(process.execPath, [INSPECTOR, "--cli", ...args], {
    env: { PATH: process.env.PATH, HOME: home, LANG: "C.UTF-8",
      XDG_STATE_HOME: path.join(home, "state") },
    cwd: home,
    timeoutMs: 30000,
  });
  check(r.code === exit, `inspector --cli ${args.join(" ")} exits ${exit} (exit ${r.code})`,
    { stdout: r.stdout, stderr: r.stderr });
  try {
    return JSON.parse(r.stdout);
  } catch {
    check(false, "the inspector prints JSON", r.stdout);
  }
  return null;
}

function text(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

function serveCommand(ws) {
  return [CAGENT, "mcp", "serve", "--profile", profile("serve"), "--workspace", ws,
    "--approve", "never"];
}

const cases = {
  async everything() {
    const list = await inspector([process.execPath, EVERYTHING, "stdio", "--method", "tools/list"]);
    check(list.tools.some((t) => t.name === "echo"), "server-everything lists echo", list);
    const echo = await inspector([process.execPath, EVERYTHING, "stdio", "--method", "tools/call",
      "--tool-name", "echo", "--tool-arg", "message=inspected"]);
    check(text(echo) === "Echo: inspected", "the echo tool answers", echo);
  },

  async list() {
    requireCagent("serve");
    const { ws } = makeWorkspace();
    const list = await inspector([...serveCommand(ws), "--method", "tools/list"]);
    const names = list.tools.map((t) => t.name).sort();
    check(JSON.stringify(names) ===
      JSON.stringify(["edit_file", "glob", "grep", "list_dir", "read_file", "run_command",
        "write_file"]), "the inspector lists the profile's tools", names);
  },

  async call() {
    requireCagent("serve");
    const { ws } = makeWorkspace();
    const read = await inspector([...serveCommand(ws), "--method", "tools/call",
      "--tool-name", "read_file", "--tool-arg", "path=notes.txt"]);
    check(read.isError !== true && text(read).includes("sandboxed notes: 42"),
      "read_file through the inspector", read);
    const cmd = await inspector([...serveCommand(ws), "--method", "tools/call",
      "--tool-name", "run_command", "--tool-arg", "command=echo inspected; cat notes.txt"]);
    check(cmd.isError !== true && text(cmd).includes("inspected") &&
      text(cmd).includes("sandboxed notes: 42"), "run_command through the inspector", cmd);
    const secret = await inspector([...serveCommand(ws), "--method", "tools/call",
      "--tool-name", "read_file", "--tool-arg", "path=.env"], { exit: 5 });
    check(secret.isError === true && !text(secret).includes("planted-secret"),
      "a refused read comes back as isError without the secret", secret);
  },

  async http() {
    requireCagent("serve");
    requireClients(["@modelcontextprotocol/sdk"]);
    const { startServe } = await import("./lib/serve.mjs");
    const { ws } = makeWorkspace();
    const s = await startServe({ transport: "http", profile: profile("serve"), workspace: ws,
      stateDir: tempDir("state"), connect: false });
    try {
      const auth = `Authorization: Bearer ${s.token}`;
      const list = await inspector([s.url, "--transport", "http", "--header", auth,
        "--method", "tools/list"]);
      check(list.tools.some((t) => t.name === "run_command"), "tools/list over HTTP", list);
      const cmd = await inspector([s.url, "--transport", "http", "--header", auth,
        "--method", "tools/call", "--tool-name", "run_command", "--tool-arg",
        "command=echo over-http"]);
      check(cmd.isError !== true && text(cmd).includes("over-http"), "tools/call over HTTP", cmd);
    } finally {
      await s.close();
    }
  },
};

await runCases(cases);
