// Starts `cagent mcp serve` and connects the official SDK client to it, over stdio or Streamable
// HTTP (loopback, bearer token).

import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { CAGENT, tempDir } from "./harness.mjs";

// A TCP port on 127.0.0.1 that was free a moment ago.
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: "127.0.0.1", port });
    sock.on("connect", () => {
      sock.destroy();
      resolve(true);
    });
    sock.on("error", () => resolve(false));
  });
}

// The argv of `cagent mcp serve` for a profile and workspace.
export function serveArgs({ profile, workspace, approve = "never", extra = [] }) {
  return ["mcp", "serve", "--profile", profile, "--workspace", workspace, "--approve", approve,
    ...extra];
}

// The environment cagent runs in: PATH, HOME, and XDG_STATE_HOME (where its session directory
// goes) when stateDir is given.
export function serveEnv(stateDir) {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME ?? "/root", LANG: "C.UTF-8" };
  if (stateDir) env.XDG_STATE_HOME = stateDir;
  return env;
}

// Options: transport ("stdio" | "http"), profile, workspace, approve, stateDir,
// capabilities (the client's),
// setup(client) before connecting, connect (false: start the server only; http).
// Resolves to { client, url, token, stderr(), waitEnded(ms), close() }.
export async function startServe(opts) {
  const { transport, capabilities = {}, setup, connect = true } = opts;
  let stderr = "";
  let ended = false;
  const endWaiters = [];
  const markEnded = () => {
    ended = true;
    for (const w of endWaiters.splice(0)) w(true);
  };
  const waitEnded = (ms) =>
    ended
      ? Promise.resolve(true)
      : new Promise((resolve) => {
          endWaiters.push(resolve);
          setTimeout(() => resolve(ended), ms);
        });
  const client = new Client({ name: "cagent-e2e-sdk", version: "1.0.0" }, { capabilities });
  if (setup) setup(client);

  if (transport === "stdio") {
    const t = new StdioClientTransport({
      command: CAGENT,
      args: serveArgs(opts),
      stderr: "pipe",
      env: serveEnv(opts.stateDir),
    });
    t.stderr.on("data", (d) => (stderr += d));
    client.onclose = markEnded;
    await client.connect(t);
    return {
      client,
      stderr: () => stderr,
      waitEnded,
      close: async () => {
        await client.close().catch(() => {});
      },
    };
  }

  const dir = tempDir("http");
  const token = crypto.randomBytes(24).toString("hex");
  const tokenFile = path.join(dir, "token");
  fs.writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  // cagent names the address once it listens ("serving MCP at http://…/mcp"). A port taken between
  // freePort and cagent's bind makes it exit: try another, up to three times.
  let child = null;
  let port = 0;
  for (let attempt = 1; child === null; attempt += 1) {
    port = await freePort();
    stderr = "";
    ended = false;
    const c = spawn(
      CAGENT,
      serveArgs({ ...opts, extra: ["--listen", `127.0.0.1:${port}`, "--token-file", tokenFile] }),
      { stdio: ["ignore", "pipe", "pipe"], env: serveEnv(opts.stateDir) },
    );
    let exited = false;
    c.stdout.on("data", (d) => (stderr += d));
    c.stderr.on("data", (d) => (stderr += d));
    c.on("exit", () => {
      exited = true;
      if (child === c) markEnded();
    });
    const banner = `http://127.0.0.1:${port}/mcp`;
    const deadline = Date.now() + 15000;
    while (!stderr.includes(banner) && !exited && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 25));
    }
    if (stderr.includes(banner) && !exited && (await canConnect(port))) {
      child = c;
    } else {
      c.kill("SIGKILL");
      if (attempt === 3 || !exited) {
        throw new Error(`cagent mcp serve --listen 127.0.0.1:${port} did not listen:\n${stderr}`);
      }
    }
  }
  const url = `http://127.0.0.1:${port}/mcp`;
  if (connect) {
    const t = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    await client.connect(t);
  }
  return {
    client,
    url,
    token,
    stderr: () => stderr,
    waitEnded,
    close: async () => {
      if (connect) await client.close().catch(() => {});
      if (!ended) {
        child.kill("SIGTERM");
        if (!(await waitEnded(3000))) child.kill("SIGKILL");
      }
    },
  };
}
