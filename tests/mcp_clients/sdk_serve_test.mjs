// The official TypeScript SDK client (@modelcontextprotocol/sdk) driving `cagent mcp serve`, over
// stdio (StdioClientTransport) or Streamable HTTP (StreamableHTTPClientTransport with the bearer
// token). One case per ctest:
//
//   node sdk_serve_test.mjs stdio|http CASE
//
// Cases: list, read, run, deny, ask, askfallback, cancel, progress, budget, audit; and for http:
// unauthorized.

import fs from "node:fs";
import path from "node:path";

import {
  AssertionFailed,
  CAGENT,
  callEvents,
  check,
  makeWorkspace,
  profile,
  readEvents,
  requireCagent,
  requireClients,
  run,
  runCases,
  sessionDirFrom,
  sessionDirsUnder,
  tempDir,
  within,
} from "./lib/harness.mjs";

requireClients(["@modelcontextprotocol/sdk"]);
requireCagent("serve");

const { startServe } = await import("./lib/serve.mjs");
const { ElicitRequestSchema } = await import("@modelcontextprotocol/sdk/types.js");

const transport = process.argv[2];
if (transport !== "stdio" && transport !== "http") {
  console.error("usage: sdk_serve_test.mjs stdio|http CASE");
  process.exit(2);
}
process.argv.splice(2, 1);
// The cancelled command's argument, distinct per transport (ctest runs the two in parallel).
const SLEEP_ARG = transport === "stdio" ? "31.25" : "31.75";

// The tools the profile serve.cagent enables (base's plus write_file and edit_file), with the
// properties and required arguments of common/tool_schemas.cc, and what their annotations must say.
const EXPECTED_TOOLS = {
  read_file: { props: ["limit", "offset", "path"], required: ["path"], readOnly: true, idem: true },
  list_dir: { props: ["path"], required: [], readOnly: true, idem: true },
  glob: { props: ["path", "pattern"], required: ["pattern"], readOnly: true, idem: true },
  grep: {
    props: ["ignore_case", "include", "path", "pattern"],
    required: ["pattern"],
    readOnly: true,
    idem: true,
  },
  write_file: {
    props: ["content", "path"],
    required: ["content", "path"],
    readOnly: false,
    idem: true, // the same content written twice leaves the same file
  },
  edit_file: {
    props: ["new_string", "old_string", "path", "replace_all"],
    required: ["new_string", "old_string", "path"],
    readOnly: false,
    idem: false,
  },
  run_command: {
    props: ["command", "timeout_ms"],
    required: ["command"],
    readOnly: false,
    idem: false,
  },
};

function text(result) {
  return (result.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

async function withServe(opts, fn) {
  const s = await startServe({ transport, stateDir: tempDir("state"), ...opts });
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

const cases = {
  async list() {
    const { ws } = makeWorkspace();
    await withServe({ profile: profile("serve"), workspace: ws }, async ({ client }) => {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name).sort();
      check(
        JSON.stringify(names) === JSON.stringify(Object.keys(EXPECTED_TOOLS).sort()),
        "tools/list offers exactly the profile's tools",
        names,
      );
      for (const tool of tools) {
        const want = EXPECTED_TOOLS[tool.name];
        const schema = tool.inputSchema;
        check(schema?.type === "object", `${tool.name}: inputSchema is an object schema`, schema);
        check(
          JSON.stringify(Object.keys(schema.properties ?? {}).sort()) ===
            JSON.stringify(want.props),
          `${tool.name}: inputSchema properties as in common/tool_schemas.cc`,
          schema,
        );
        check(
          JSON.stringify([...(schema.required ?? [])].sort()) === JSON.stringify(want.required),
          `${tool.name}: required arguments`,
          schema,
        );
        check(typeof tool.description === "string" && tool.description.length > 10,
          `${tool.name}: a description`, tool);
        const a = tool.annotations ?? {};
        check(a.readOnlyHint === want.readOnly, `${tool.name}: readOnlyHint ${want.readOnly}`, a);
        // A write or a command can destroy data; a read cannot. Nothing reaches the network
        // (the profile's network is none), so no tool is open-world.
        check(a.destructiveHint === !want.readOnly, `${tool.name}: destructiveHint ${!want.readOnly}`,
          a);
        check(a.idempotentHint === want.idem, `${tool.name}: idempotentHint ${want.idem}`, a);
        check(a.openWorldHint === false, `${tool.name}: openWorldHint false`, a);
        check(tool.outputSchema?.type === "object", `${tool.name}: an outputSchema`, tool);
      }
      const runCommand = tools.find((t) => t.name === "run_command");
      check(runCommand.annotations.destructiveHint === true, "run_command is destructive",
        runCommand.annotations);
      check(runCommand.outputSchema?.type === "object", "run_command has an outputSchema",
        runCommand);
    });
  },

  async read() {
    const { ws } = makeWorkspace();
    await withServe({ profile: profile("serve"), workspace: ws }, async ({ client }) => {
      const r = await client.callTool({ name: "read_file", arguments: { path: "notes.txt" } });
      check(r.isError !== true, "read_file notes.txt succeeds", r);
      check(text(r).includes("sandboxed notes: 42"), "read_file returns the file's text", r);
    });
  },

  async run() {
    const { ws } = makeWorkspace();
    await withServe({ profile: profile("serve"), workspace: ws }, async ({ client }) => {
      // listTools first: the SDK client then validates structuredContent against outputSchema.
      await client.listTools();
      const r = await client.callTool({ name: "run_command", arguments: { command: "echo hi" } });
      check(r.isError !== true, "run_command echo hi succeeds", r);
      check(/\bhi\b/.test(text(r)), "the text content carries the output", r);
      check(r.structuredContent && typeof r.structuredContent === "object",
        "structuredContent present", r);
      check(JSON.stringify(r.structuredContent).includes("hi"),
        "structuredContent carries the output", r.structuredContent);
      // It ran in the sandbox, in the workspace: the workspace file is there by a relative path,
      // the host file one directory up is not.
      const cat = await client.callTool({
        name: "run_command",
        arguments: { command: "cat notes.txt; cat ../outside.txt; echo rc=$?" },
      });
      check(text(cat).includes("sandboxed notes: 42"), "cat of a workspace file works", cat);
      check(!text(cat).includes("host file outside the workspace"),
        "the host file beside the workspace is not visible in the sandbox", cat);
    });
  },

  async deny() {
    const { ws } = makeWorkspace();
    await withServe({ profile: profile("serve"), workspace: ws }, async ({ client }) => {
      const env = await client.callTool({ name: "read_file", arguments: { path: ".env" } });
      check(env.isError === true, "read_file .env is refused with isError", env);
      check(!text(env).includes("planted-secret"), "the secret is not in the refusal", env);
      check(text(env).includes("deny **/.env"), "the refusal names the rule (deny **/.env)", env);

      const push = await client.callTool({
        name: "run_command",
        arguments: { command: "git push origin main" },
      });
      check(push.isError === true, "run_command git push is refused with isError", push);
      check(text(push).includes("commands: deny git push"),
        "the refusal names the deny rule (commands: deny git push)", push);
      check(text(push).includes("commit locally"), "and gives the rule's reason", push);
      // A program no rule names: base's default (deny), said so.
      const curl = await client.callTool({
        name: "run_command",
        arguments: { command: "curl http://127.0.0.1:9/" },
      });
      check(curl.isError === true, "run_command curl is refused with isError", curl);
      check(text(curl).includes("no commands rule allows 'curl'"),
        "the refusal says no rule allows curl", curl);

      const outside = await client.callTool({
        name: "read_file",
        arguments: { path: "../outside.txt" },
      });
      check(outside.isError === true, "read_file outside the workspace is refused", outside);
      check(!text(outside).includes("host file outside"), "and shows nothing of it", outside);

      // The session goes on after refusals.
      const ok = await client.callTool({ name: "run_command", arguments: { command: "echo on" } });
      check(ok.isError !== true && text(ok).includes("on"), "a later call still works", ok);
    });
  },

  async ask() {
    const { ws } = makeWorkspace();
    const asked = [];
    const answers = ["accept", "decline"];
    await withServe(
      {
        profile: profile("serve"),
        workspace: ws,
        capabilities: { elicitation: { form: {} } },
        setup(client) {
          client.setRequestHandler(ElicitRequestSchema, async (req) => {
            asked.push(req.params);
            const action = answers[asked.length - 1] ?? "decline";
            if (action !== "accept") return { action };
            return { action, content: acceptContent(req.params.requestedSchema) };
          });
        },
      },
      async ({ client }) => {
        const yes = await client.callTool({
          name: "run_command",
          arguments: { command: "touch asked-yes" },
        });
        check(asked.length === 1, "the ask reached the client as an elicitation", asked);
        check(JSON.stringify(asked[0]).includes("touch"), "the question names the command",
          asked[0]);
        check(yes.isError !== true, "an accepted ask runs the command", yes);
        check(fs.existsSync(path.join(ws, "asked-yes")), "the command ran (asked-yes exists)");

        const no = await client.callTool({
          name: "run_command",
          arguments: { command: "touch asked-no" },
        });
        check(asked.length === 2, "the second ask reached the client too", asked);
        check(no.isError === true, "a declined ask is refused with isError", no);
        check(!fs.existsSync(path.join(ws, "asked-no")), "the declined command did not run");
      },
    );
  },

  // The same ask from a client that did not declare elicitation: --approve never decides, and the
  // call is refused without asking, naming the rule.
  async askfallback() {
    const { ws } = makeWorkspace();
    await withServe({ profile: profile("serve"), workspace: ws }, async ({ client }) => {
      const r = await client.callTool({
        name: "run_command",
        arguments: { command: "touch asked-yes" },
      });
      check(r.isError === true, "the ask is refused with isError", r);
      check(text(r).includes("ask touch asked-*"), "the refusal names the ask rule", r);
      check(!fs.existsSync(path.join(ws, "asked-yes")), "the command did not run");
    });
  },

  async cancel() {
    const { ws } = makeWorkspace();
    await withServe({ profile: profile("serve"), workspace: ws }, async ({ client }) => {
      const controller = new AbortController();
      const t0 = performance.now();
      setTimeout(() => controller.abort(), 1000);
      let rejected = null;
      try {
        await client.callTool(
          { name: "run_command", arguments: { command: `sleep ${SLEEP_ARG}` } },
          undefined,
          { signal: controller.signal, timeout: 60000 },
        );
      } catch (err) {
        rejected = err;
      }
      const ms = performance.now() - t0;
      check(rejected !== null, "the aborted call rejects");
      check(ms < 5000, `the aborted call rejects fast (${Math.round(ms)} ms)`);
      // The sandboxed sleep is killed: no process with that command line survives for long.
      let alive = true;
      for (let i = 0; i < 30 && alive; i += 1) {
        alive = sleepersAlive(SLEEP_ARG) > 0;
        if (alive) await new Promise((r) => setTimeout(r, 100));
      }
      check(!alive, "the cancelled command's process is gone within 3 s");
      const next = await client.callTool({ name: "run_command", arguments: { command: "echo after" } });
      check(next.isError !== true && text(next).includes("after"), "a following call works", next);
    });
  },

  // A command that runs a while: the client gave a progress token (onprogress), so cagent sends
  // notifications/progress while it runs (every second).
  async progress() {
    const { ws } = makeWorkspace();
    await withServe({ profile: profile("serve"), workspace: ws }, async ({ client }) => {
      const seen = [];
      const r = await client.callTool(
        { name: "run_command", arguments: { command: "sleep 2.2; echo slept" } },
        undefined,
        { onprogress: (p) => seen.push(p), timeout: 30000 },
      );
      check(r.isError !== true && text(r).includes("slept"), "the command ran to its end", r);
      check(seen.length >= 1, "progress notifications arrived while it ran", seen);
      check(seen.every((p, i) => i === 0 || p.progress > seen[i - 1].progress),
        "progress increases", seen);
    });
  },

  async budget() {
    const { ws } = makeWorkspace();
    await withServe({ profile: profile("capped"), workspace: ws }, async (s) => {
      const { client } = s;
      for (let i = 1; i <= 3; i += 1) {
        const r = await client.callTool({
          name: "run_command",
          arguments: { command: `echo call-${i}` },
        });
        check(r.isError !== true && text(r).includes(`call-${i}`), `call ${i} of 3 runs`, r);
      }
      let fourth = null;
      let fourthError = null;
      try {
        fourth = await within(
          10000,
          client.callTool({ name: "run_command", arguments: { command: "echo call-4" } }),
          "the fourth call",
        );
      } catch (err) {
        fourthError = err;
      }
      // The call past the budget is answered, naming the budget: a tool result with isError, or a
      // JSON-RPC error (not the transport's own "connection closed" or a timeout).
      if (fourth !== null) {
        check(fourth.isError === true && !text(fourth).includes("call-4") &&
          /tool-calls|budget/i.test(text(fourth)), "the call past the budget is an error naming it",
        fourth);
      } else {
        const code = fourthError?.code;
        check(code !== -32000 && code !== -32001 && /tool-calls|budget/i.test(String(fourthError)),
          "the call past the budget gets a JSON-RPC error naming the budget", String(fourthError));
      }
      // The session ends: on stdio cagent exits; over HTTP the server goes on listening for other
      // sessions, and this one answers no more calls.
      let ended;
      if (transport === "stdio") {
        ended = await s.waitEnded(5000);
      } else {
        ended = await within(5000, client.callTool({ name: "run_command",
          arguments: { command: "echo call-5" } }), "a call after the end")
          .then((r) => r.isError === true && !text(r).includes("call-5"))
          .catch((err) => !(err instanceof AssertionFailed));
      }
      check(ended, "cagent ends the session after the budget", s.stderr());
      // The reason is printed when the session's sandbox is gone, which over HTTP may be a little
      // after the refused call was answered: wait for it (up to 5 s) rather than race it.
      const says = () => /tool-calls|budget/i.test(s.stderr().replace(/profile capped/g, ""));
      for (let waited = 0; !says() && waited < 5000; waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      check(says(), "cagent says why on stderr", s.stderr());
    });
  },

  async audit() {
    const { ws } = makeWorkspace();
    const state = tempDir("state");
    let stderr = "";
    await withServe({ profile: profile("serve"), workspace: ws, stateDir: state }, async (s) => {
      await s.client.callTool({ name: "run_command", arguments: { command: "echo audited" } });
      await s.client.callTool({ name: "read_file", arguments: { path: ".env" } });
      stderr = s.stderr();
    });
    const dir = sessionDirFrom(stderr);
    check(dir !== null, "cagent names its session directory (with events.jsonl) on stderr", stderr);
    check(sessionDirsUnder(state).includes(dir), "under its XDG_STATE_HOME", sessionDirsUnder(state));
    const events = readEvents(dir);
    const ran = callEvents(events, "mcp_call", "run_command", { command: "echo audited" });
    check(ran.length === 1 && ran[0].verdict === "allow",
      "the run_command call is audited (mcp_call, allow, its args' digest)", events);
    const denied = callEvents(events, "mcp_call", "read_file", { path: ".env" });
    check(denied.length === 1 && denied[0].verdict === "deny" &&
      JSON.stringify(denied[0]).includes("**/.env"), "the denial is audited with its rule", events);
    check(!JSON.stringify(events).includes("planted-secret"), "the secret is not in the log");
    const log = await run(CAGENT, ["log", dir]);
    check(log.code === 0, "`cagent log DIR` reads the session (hash chain intact)", log);
  },
};

if (transport === "http") {
  cases.unauthorized = async () => {
    const { ws } = makeWorkspace();
    await withServe({ profile: profile("serve"), workspace: ws, connect: false }, async (s) => {
      const body = JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-11-25",
          capabilities: {},
          clientInfo: { name: "raw", version: "0" },
        },
      });
      const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
      const none = await fetch(s.url, { method: "POST", headers, body });
      check(none.status === 401, "a request without the token is refused 401", none.status);
      const wrong = await fetch(s.url, {
        method: "POST",
        headers: { ...headers, authorization: "Bearer not-the-token" },
        body,
      });
      check(wrong.status === 401, "a request with a wrong token is refused 401", wrong.status);
      const right = await fetch(s.url, {
        method: "POST",
        headers: { ...headers, authorization: `Bearer ${s.token}` },
        body,
      });
      check(right.status === 200, "the same request with the token is answered", right.status);
    });
  };
}

// Form values for an approval question: true for booleans, an approving choice for enums.
function acceptContent(schema) {
  const out = {};
  for (const [key, prop] of Object.entries(schema?.properties ?? {})) {
    if (prop.type === "boolean") out[key] = true;
    else if (Array.isArray(prop.enum)) {
      out[key] = prop.enum.find((v) => /^(allow|approve|yes|once|accept)/i.test(v)) ?? prop.enum[0];
    } else if (Array.isArray(prop.oneOf)) {
      const values = prop.oneOf.map((o) => o.const);
      out[key] = values.find((v) => /^(allow|approve|yes|once|accept)/i.test(v)) ?? values[0];
    } else if (prop.type === "string") out[key] = "yes";
    else if (prop.type === "number" || prop.type === "integer") out[key] = prop.default ?? 1;
  }
  return out;
}

// How many processes run `sleep ARG` on this machine (the sandbox's are visible from outside).
function sleepersAlive(arg) {
  let n = 0;
  for (const pid of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (path.basename(argv[0]) === "sleep" && argv[1] === arg) n += 1;
    } catch {
      // gone
    }
  }
  return n;
}

await runCases(cases);
