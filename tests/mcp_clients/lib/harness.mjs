// Shared pieces of the real-client MCP tests (tests/mcp_clients): where things are, the
// skip-or-fail rule for a missing toolchain, temporary workspaces, child processes, and a tiny
// case runner whose exit code ctest reads (0 passed, 1 failed, 77 skipped).

import { spawn, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const CLIENTS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const REPO_DIR = path.resolve(CLIENTS_DIR, "..", "..");
export const PROFILES_DIR = path.join(CLIENTS_DIR, "profiles");
export const NODE_MODULES = path.join(CLIENTS_DIR, "node_modules");
export const CAGENT =
  process.env.CAGENT_BINARY ?? path.join(REPO_DIR, "build", "launcher", "cagent");
export const EVERYTHING = path.join(
  NODE_MODULES,
  "@modelcontextprotocol",
  "server-everything",
  "dist",
  "index.js",
);
export const SKIP = 77;

export function profile(name) {
  return path.join(PROFILES_DIR, `${name}.cagent`);
}

// Ends the process: skipped (77), saying why, unless CAGENT_REQUIRE_MCP_CLIENTS=1 (CI), where
// a missing piece is a failure.
export function missing(why) {
  if (process.env.CAGENT_REQUIRE_MCP_CLIENTS === "1") {
    console.error(`FAIL: ${why} (CAGENT_REQUIRE_MCP_CLIENTS=1: a missing client is a failure)`);
    process.exit(1);
  }
  console.error(`SKIP: ${why}`);
  process.exit(SKIP);
}

// Checks that `npm ci` ran in tests/mcp_clients (the packages named) before anything imports them.
export function requireClients(packages) {
  for (const pkg of packages) {
    if (!fs.existsSync(path.join(NODE_MODULES, ...pkg.split("/"), "package.json"))) {
      missing(`${pkg} is not installed: run \`npm ci\` in ${CLIENTS_DIR}`);
    }
  }
}

// Checks that the cagent binary exists and has `cagent mcp SUB` (serve or wrap).
export function requireCagent(sub) {
  if (!fs.existsSync(CAGENT)) missing(`no cagent binary at ${CAGENT} (set CAGENT_BINARY)`);
  const r = spawnSync(CAGENT, ["mcp", sub, "--help"], { encoding: "utf8", timeout: 10000 });
  // CLI11 answers --help for an unknown subcommand with the top-level help (exit 0): the help must
  // be the subcommand's own.
  const help = `${r.stdout ?? ""}${r.stderr ?? ""}`;
  if (r.status !== 0 || !help.includes(`mcp ${sub}`)) {
    missing(`this cagent (${CAGENT}) has no \`cagent mcp ${sub}\`: \`cagent mcp ${sub} --help\` ` +
      `exited ${r.status}: ${help.slice(0, 200)}`);
  }
}

// A fresh directory under the system temporary directory, removed at exit.
const cleanups = [];
export function tempDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `cagent-mcp-${prefix}-`));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}
export function onExit(fn) {
  cleanups.push(fn);
}
process.on("exit", () => {
  for (const fn of cleanups.reverse()) {
    try {
      fn();
    } catch {
      // best effort
    }
  }
});

// A workspace for the serve tests: notes.txt, a planted .env secret, and a host file outside it.
export function makeWorkspace() {
  const root = tempDir("ws");
  const ws = path.join(root, "workspace");
  fs.mkdirSync(ws);
  fs.writeFileSync(path.join(ws, "notes.txt"), "line one of the notes\nsandboxed notes: 42\n");
  fs.writeFileSync(path.join(ws, ".env"), "API_TOKEN=planted-secret-7f3a\n");
  fs.writeFileSync(path.join(root, "outside.txt"), "host file outside the workspace\n");
  return { root, ws };
}

// The session directory cagent names on stderr (the first absolute path printed there that is a
// directory holding events.jsonl), or null.
export function sessionDirFrom(stderr) {
  for (const m of stderr.matchAll(/(\/[^\s'"`]+)/g)) {
    const p = m[1].replace(/[.,:;)]+$/, "");
    for (const candidate of [p, path.dirname(p)]) {
      try {
        if (fs.existsSync(path.join(candidate, "events.jsonl"))) return candidate;
      } catch {
        // not a path
      }
    }
  }
  return null;
}

// Every directory under root that holds an events.jsonl (cagent's session directories when root is
// the XDG_STATE_HOME cagent ran with).
export function sessionDirsUnder(root) {
  const out = [];
  const walk = (dir, depth) => {
    if (depth > 6) return;
    let entries = [];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    if (entries.some((e) => e.name === "events.jsonl" && e.isFile())) out.push(dir);
    for (const e of entries) if (e.isDirectory()) walk(path.join(dir, e.name), depth + 1);
  };
  walk(root, 0);
  return out;
}

// The audit events of a session directory (events.jsonl, one JSON object a line).
export function readEvents(dir) {
  return fs
    .readFileSync(path.join(dir, "events.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

// How cagent's audit log names a call's arguments: the SHA-256 of their JSON (no blanks; the
// callers pass one-key objects, so key order cannot differ).
export function argsDigest(args) {
  return crypto.createHash("sha256").update(JSON.stringify(args)).digest("hex");
}

// The events of `events` (parsed audit events) of kind `event` for `tool` whose args digest is
// that of `args`.
export function callEvents(events, event, tool, args) {
  const digest = argsDigest(args);
  return events.filter((e) => e.event === event && e.tool === tool && e.args === digest);
}

// Runs a command to its end; resolves to { code, signal, stdout, stderr, ms }.
export function run(cmd, args, { env, cwd, timeoutMs = 60000, input } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { env, cwd, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - t0 });
    });
    if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
  });
}

export class AssertionFailed extends Error {}

export function check(cond, what, detail) {
  if (!cond) {
    const more = detail === undefined ? "" : `\n  got: ${stringify(detail)}`;
    throw new AssertionFailed(`${what}${more}`);
  }
}

function stringify(v) {
  if (typeof v === "string") return v.length > 2000 ? `${v.slice(0, 2000)}…` : v;
  try {
    const s = JSON.stringify(v);
    return s.length > 2000 ? `${s.slice(0, 2000)}…` : s;
  } catch {
    return String(v);
  }
}

// Resolves to the promise's value, or rejects after ms.
export function within(ms, promise, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new AssertionFailed(`${what}: no answer in ${ms} ms`)), ms);
    }),
  ]);
}

// Runs the case named by argv[2] (or every case with "all"), printing one line per case and a
// closing "N passed, N failed" line, then exits.
export async function runCases(cases) {
  const wanted = process.argv[2] ?? "all";
  const names = wanted === "all" ? Object.keys(cases) : wanted.split(",");
  let passed = 0;
  let failed = 0;
  for (const name of names) {
    const fn = cases[name];
    if (!fn) {
      console.error(`unknown case ${name}; cases: ${Object.keys(cases).join(" ")}`);
      process.exit(2);
    }
    const t0 = performance.now();
    try {
      await fn();
      passed += 1;
      console.log(`ok ${name} (${Math.round(performance.now() - t0)} ms)`);
    } catch (err) {
      failed += 1;
      console.log(`not ok ${name} (${Math.round(performance.now() - t0)} ms)`);
      console.log(`  ${err instanceof AssertionFailed ? err.message : err?.stack ?? err}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}
