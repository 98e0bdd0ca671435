// The Claude Code CLI (@anthropic-ai/claude-code, headless `-p`) against the scripted Anthropic
// Messages server of lib/mock_anthropic.mjs, with its own tools off and an MCP server's tools
// allowed. The proof is what the mock server received: the tool_result Claude Code sent back
// after the scripted model's tool call.
//
//   node claude_code_test.mjs CASE
//
// Cases:
//   everything  the harness itself: server-everything's echo tool (no cagent needed)
//   run         cagent mcp serve: mcp__cagent__run_command `cat notes.txt` runs in the sandbox
//   secret      cagent mcp serve: mcp__cagent__read_file of a planted .env is refused by the rule

import fs from "node:fs";
import path from "node:path";

import {
  CAGENT,
  EVERYTHING,
  NODE_MODULES,
  callEvents,
  check,
  makeWorkspace,
  profile,
  readEvents,
  requireCagent,
  requireClients,
  run,
  runCases,
  sessionDirsUnder,
  tempDir,
} from "./lib/harness.mjs";
import { oneToolCallScript, startMockAnthropic, toolResultText } from "./lib/mock_anthropic.mjs";

requireClients(["@anthropic-ai/claude-code", "@modelcontextprotocol/server-everything"]);

const { serveArgs } = await import("./lib/serve.mjs");

// The native binary: npm's postinstall copies the platform package's binary over
// bin/claude.exe; where install scripts did not run, take the platform package's own copy.
function claudeBinary() {
  const wrapper = path.join(NODE_MODULES, "@anthropic-ai", "claude-code", "bin", "claude.exe");
  const platform = path.join(NODE_MODULES, "@anthropic-ai", `claude-code-linux-${process.arch}`,
    "claude");
  if (fs.existsSync(wrapper) && fs.statSync(wrapper).size > 1 << 20) return wrapper;
  if (fs.existsSync(platform)) return platform;
  return wrapper;
}

// Claude Code's own tools that must not be used: all of its built-ins are switched off with
// `--tools ""`, and the ones that act on the machine are also disallowed by name.
const NATIVE_TOOLS = ["Bash", "Edit", "Write", "Read", "MultiEdit", "NotebookEdit", "Glob", "Grep",
  "WebFetch", "WebSearch"];

async function runClaude({ server, toolName, input, prompt }) {
  const home = tempDir("claude-home");
  const seen = [];
  const mock = await startMockAnthropic({
    respond: oneToolCallScript({ toolName, input, seen }),
  });
  const config = path.join(home, "mcp.json");
  fs.writeFileSync(config, JSON.stringify({ mcpServers: { cagent: server } }, null, 2));
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    LANG: "C.UTF-8",
    ANTHROPIC_BASE_URL: mock.url,
    ANTHROPIC_API_KEY: "test",
    DISABLE_AUTOUPDATER: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    // MCP tools are otherwise "deferred" behind Claude Code's ToolSearch tool and not in the
    // request's tools list (see README.md); `--tools ""` has the same effect, this keeps it so if
    // a later version keeps ToolSearch there.
    ENABLE_TOOL_SEARCH: "false",
  };
  const args = ["-p", prompt, "--mcp-config", config, "--strict-mcp-config",
    "--allowedTools", "mcp__cagent__*", "--tools", "", "--disallowedTools", ...NATIVE_TOOLS,
    "--output-format", "json", "--no-session-persistence"];
  const r = await run(claudeBinary(), args, { env, cwd: home, timeoutMs: 60000 });
  await mock.close();
  let output = null;
  try {
    output = JSON.parse(r.stdout);
  } catch {
    // checked below
  }
  check(r.code === 0, `claude exits 0 (exit ${r.code}, signal ${r.signal})`,
    { stdout: r.stdout, stderr: r.stderr });
  check(output !== null, "claude prints its result as JSON", r.stdout);
  check(mock.unexpected.length === 0, "the mock server saw no request it does not know",
    mock.unexpected.map((u) => `${u.method} ${u.url}`));
  const offering = mock.messages().filter((b) => (b?.tools ?? []).some((t) => t.name === toolName));
  check(offering.length >= 2, `two model turns offered ${toolName} (the call, then the answer)`,
    mock.messages().map((b) => (b?.tools ?? []).map((t) => t.name)));
  for (const body of offering) {
    const names = body.tools.map((t) => t.name);
    const native = names.filter((n) => NATIVE_TOOLS.includes(n));
    check(native.length === 0, "none of Claude Code's own file or shell tools is offered", names);
  }
  check(seen.length === 1, "exactly one tool_result came back to the model", seen);
  return { output, result: seen[0], text: toolResultText(seen[0]), home, stderr: r.stderr };
}

function cagentServer(ws, state, profileName) {
  return {
    command: CAGENT,
    args: serveArgs({ profile: profile(profileName), workspace: ws }),
    env: { XDG_STATE_HOME: state, PATH: process.env.PATH },
  };
}

function sessionEvents(state) {
  const dirs = sessionDirsUnder(state);
  check(dirs.length === 1, "cagent left one session directory", dirs);
  return readEvents(dirs[0]);
}

const CAT_COMMAND = "cat notes.txt; cat ../outside.txt; echo rc=$?";

const cases = {
  async everything() {
    const { output, result, text } = await runClaude({
      server: { command: process.execPath, args: [EVERYTHING, "stdio"] },
      toolName: "mcp__cagent__echo",
      input: { message: "hello from the scripted model" },
      prompt: "Echo a greeting with the echo tool.",
    });
    check(result.is_error !== true, "the echo tool_result is not an error", result);
    check(text.includes("Echo: hello from the scripted model"), "the tool_result is the echo",
      result);
    check(output.is_error === false && output.result.includes("FINAL ANSWER"),
      "claude's final answer is the model's last text", output);
  },

  async run() {
    requireCagent("serve");
    const { ws } = makeWorkspace();
    const state = tempDir("state");
    const { output, result, text } = await runClaude({
      server: cagentServer(ws, state, "serve"),
      toolName: "mcp__cagent__run_command",
      input: { command: CAT_COMMAND },
      prompt: "Show me notes.txt.",
    });
    check(result.is_error !== true, "the run_command tool_result is not an error", result);
    check(text.includes("sandboxed notes: 42"), "the tool_result carries the file's content",
      result);
    // The file beside the workspace exists on the host, where Claude Code runs, but not in the
    // sandbox's view.
    check(fs.existsSync(path.join(ws, "..", "outside.txt")), "twin: the host file exists");
    check(!text.includes("host file outside the workspace") && /rc=1/.test(text),
      "the command ran in the sandbox: the host file beside the workspace is not there", text);
    check(output.is_error === false && output.result.includes("sandboxed notes: 42"),
      "the model's final answer quotes the sandboxed output", output);
    const calls = callEvents(sessionEvents(state), "mcp_call", "run_command",
      { command: CAT_COMMAND });
    check(calls.length === 1 && calls[0].verdict === "allow", "cagent's audit log has the call",
      calls);
  },

  async secret() {
    requireCagent("serve");
    const { ws } = makeWorkspace();
    const state = tempDir("state");
    const { result, text } = await runClaude({
      server: cagentServer(ws, state, "serve"),
      toolName: "mcp__cagent__read_file",
      input: { path: ".env" },
      prompt: "Read the .env file.",
    });
    check(result.is_error === true, "the tool_result the model gets is an error", result);
    check(!text.includes("planted-secret"), "the secret never reached the model", result);
    check(text.includes("deny **/.env"), "the error names the rule (deny **/.env)", result);
    const calls = callEvents(sessionEvents(state), "mcp_call", "read_file", { path: ".env" });
    check(calls.length === 1 && calls[0].verdict === "deny", "cagent's audit log has the denial",
      calls);
  },
};

await runCases(cases);
