// Round-trip latency of one MCP tools/call from the official SDK client (stdio), interleaved:
//
//   cagent-run_command-true   `cagent mcp serve` (profiles/bench.cagent): run_command `true N`
//                             (policy decision, a command in the warm sandbox, audit)
//   cagent-read_file          `cagent mcp serve`: read_file of 20 lines of a workspace file
//   everything-echo           server-everything's echo tool (an unconfined node server: the cost
//                             of MCP itself through the SDK)
//   srt-true (optional)       sandbox-runtime's per-command cost: `srt true` spawned and waited
//                             for (tests/bench/egress's pinned @anthropic-ai/sandbox-runtime;
//                             needs its dependencies rg and socat)
//   spawn-sh-true             spawning `/bin/sh -c true` from node, unconfined, for scale
//
//   node bench.mjs [--iterations N] [--warmup N] [--srt-iterations N] [--json FILE] [--no-cagent]
//
// Each iteration calls every target once, in the same order, so drift affects all alike. Prints
// p50, p99, mean, min and max in milliseconds; --json writes the numbers and what was measured.

import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import {
  CAGENT,
  CLIENTS_DIR,
  EVERYTHING,
  REPO_DIR,
  makeWorkspace,
  profile,
  requireClients,
  tempDir,
} from "./lib/harness.mjs";

requireClients(["@modelcontextprotocol/sdk", "@modelcontextprotocol/server-everything"]);
const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
const { serveArgs, serveEnv } = await import("./lib/serve.mjs");

function parseArgs(argv) {
  const opts = { iterations: 300, warmup: 30, srtIterations: 30, json: null, cagent: true };
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--iterations") opts.iterations = Number(next());
    else if (a === "--warmup") opts.warmup = Number(next());
    else if (a === "--srt-iterations") opts.srtIterations = Number(next());
    else if (a === "--json") opts.json = next();
    else if (a === "--no-cagent") opts.cagent = false;
    else {
      console.error(`usage: bench.mjs [--iterations N] [--warmup N] [--srt-iterations N] ` +
        `[--json FILE] [--no-cagent]`);
      process.exit(2);
    }
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));

async function connect(command, args, env) {
  const client = new Client({ name: "cagent-mcp-bench", version: "1.0.0" }, { capabilities: {} });
  const transport = new StdioClientTransport({ command, args, env, stderr: "pipe" });
  let stderr = "";
  transport.stderr.on("data", (d) => (stderr += d));
  try {
    await client.connect(transport);
  } catch (err) {
    throw new Error(`${command} ${args.join(" ")}: ${err}\n${stderr}`);
  }
  return client;
}

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
  const round = (x) => Math.round(x * 1000) / 1000;
  return {
    n: s.length,
    p50_ms: round(q(0.5)),
    p99_ms: round(q(0.99)),
    mean_ms: round(s.reduce((a, b) => a + b, 0) / s.length),
    min_ms: round(s[0]),
    max_ms: round(s[s.length - 1]),
  };
}

function spawnWait(command, args, env) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(command, args, { env, stdio: "ignore" });
    child.on("error", reject);
    child.on("exit", (code) => {
      const ms = performance.now() - t0;
      if (code === 0) resolve(ms);
      else reject(new Error(`${command} ${args.join(" ")} exited ${code}`));
    });
  });
}

const targets = [];
const notes = {};
const clients = [];

if (opts.cagent) {
  const { ws } = makeWorkspace();
  // cagent's loop detection refuses a third identical call with an unchanged workspace, so every
  // call differs: `true N` (true ignores its arguments) and a read at a different offset.
  const lines = Array.from({ length: 4000 }, (_, i) => `line ${i + 1} of the benchmark file`);
  fs.writeFileSync(path.join(ws, "bench.txt"), `${lines.join("\n")}\n`);
  const client = await connect(CAGENT,
    serveArgs({ profile: profile("bench"), workspace: ws }), serveEnv(tempDir("state")));
  clients.push(client);
  const call = async (name, args) => {
    const r = await client.callTool({ name, arguments: args });
    if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`);
  };
  let n = 0;
  targets.push({
    name: "cagent-run_command-true",
    call: () => call("run_command", { command: `true ${(n += 1)}` }),
  });
  let m = 0;
  targets.push({
    name: "cagent-read_file",
    call: () => call("read_file", { path: "bench.txt", offset: 1 + ((m += 1) % 3900), limit: 20 }),
  });
}
{
  const client = await connect(process.execPath, [EVERYTHING, "stdio"],
    { PATH: process.env.PATH, HOME: process.env.HOME ?? "/root" });
  clients.push(client);
  targets.push({
    name: "everything-echo",
    call: async () => {
      await client.callTool({ name: "echo", arguments: { message: "x" } });
    },
  });
}
targets.push({
  name: "spawn-sh-true",
  call: () => spawnWait("/bin/sh", ["-c", "true"], { PATH: process.env.PATH }),
});

// Runs `call` and times it (the SDK client's round trip: request written, response parsed).
async function timed(call) {
  const t0 = performance.now();
  await call();
  return performance.now() - t0;
}

const samples = Object.fromEntries(targets.map((t) => [t.name, []]));
for (let i = 0; i < opts.warmup; i += 1) for (const t of targets) await t.call();
for (let i = 0; i < opts.iterations; i += 1) {
  for (const t of targets) samples[t.name].push(await timed(t.call));
}

// sandbox-runtime: one `srt true` per sample (a new sandbox per command is how it works).
const srtBin = path.join(REPO_DIR, "tests", "bench", "egress", "node_modules", ".bin", "srt");
const srtMissing = !fs.existsSync(srtBin)
  ? `not installed (npm ci in tests/bench/egress)`
  : ["rg", "socat", "bwrap"].filter((t) => spawnSync("which", [t]).status !== 0);
if (typeof srtMissing === "string" || srtMissing.length > 0) {
  notes["srt-true"] = `skipped: sandbox-runtime ${typeof srtMissing === "string" ? srtMissing
    : `needs ${srtMissing.join(", ")}`}`;
} else {
  const home = tempDir("srt-home");
  const env = { PATH: process.env.PATH, HOME: home };
  samples["srt-true"] = [];
  try {
    await spawnWait(srtBin, ["true"], env);
    for (let i = 0; i < opts.srtIterations; i += 1) {
      samples["srt-true"].push(await spawnWait(srtBin, ["true"], env));
    }
  } catch (err) {
    delete samples["srt-true"];
    notes["srt-true"] = `skipped: ${err.message}`;
  }
}

for (const c of clients) await c.close().catch(() => {});

const results = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, stats(v)]));
const version = (pkg) =>
  JSON.parse(fs.readFileSync(path.join(CLIENTS_DIR, "node_modules", ...pkg.split("/"),
    "package.json"), "utf8")).version;
const report = {
  what: "MCP tools/call round trip from @modelcontextprotocol/sdk's Client over stdio, ms",
  iterations: opts.iterations,
  warmup: opts.warmup,
  machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, kernel: os.release(),
    node: process.version },
  versions: { sdk: version("@modelcontextprotocol/sdk"),
    "server-everything": version("@modelcontextprotocol/server-everything") },
  cagent: opts.cagent ? CAGENT : null,
  git: spawnSync("git", ["-C", REPO_DIR, "rev-parse", "--short", "HEAD"], { encoding: "utf8" })
    .stdout.trim(),
  results,
  notes,
};

const pad = (s, n) => String(s).padEnd(n);
console.log(`${pad("target", 26)} ${pad("n", 5)} ${pad("p50", 9)} ${pad("p99", 9)} ${pad("mean", 9)}`);
for (const [name, r] of Object.entries(results)) {
  console.log(`${pad(name, 26)} ${pad(r.n, 5)} ${pad(r.p50_ms, 9)} ${pad(r.p99_ms, 9)} ${pad(r.mean_ms, 9)}`);
}
for (const [name, note] of Object.entries(notes)) console.log(`${name}: ${note}`);
if (opts.json) fs.writeFileSync(opts.json, `${JSON.stringify(report, null, 2)}\n`);
process.exit(0);
