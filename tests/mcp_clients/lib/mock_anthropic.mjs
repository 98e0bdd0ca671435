// A scripted Anthropic Messages API server on 127.0.0.1 (a port the OS picks), for driving the
// Claude Code CLI offline. It speaks the wire format Claude Code uses: POST /v1/messages with
// "stream": true is answered with server-sent events (message_start, content_block_start /
// content_block_delta / content_block_stop for text and tool_use blocks, the latter with
// input_json_delta, message_delta, message_stop); without "stream" with one JSON message.
// POST /v1/messages/count_tokens gets a token count. Every request is recorded (method, url,
// headers, parsed body); anything else is answered 404 and recorded in `unexpected`.
//
// The script: `respond(body, server)` returns { content: [blocks], stop_reason } for one
// /v1/messages request, where a block is { type: "text", text } or
// { type: "tool_use", id, name, input }.

import http from "node:http";

let messageSerial = 0;

function sseEvent(res, type, data) {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

function usage(body) {
  return {
    input_tokens: Math.max(1, Math.ceil(JSON.stringify(body.messages ?? []).length / 4)),
    output_tokens: 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
  };
}

// Sends `reply` as the SSE stream of one message, the tool input JSON split into pieces the way
// the real API streams it.
function streamMessage(res, body, reply) {
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "request-id": `req_mock_${messageSerial}`,
  });
  const id = `msg_mock_${++messageSerial}`;
  sseEvent(res, "message_start", {
    message: {
      id,
      type: "message",
      role: "assistant",
      model: body.model ?? "claude-mock",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: usage(body),
    },
  });
  sseEvent(res, "ping", {});
  reply.content.forEach((block, index) => {
    if (block.type === "text") {
      sseEvent(res, "content_block_start", { index, content_block: { type: "text", text: "" } });
      const text = block.text;
      const half = Math.ceil(text.length / 2);
      for (const piece of [text.slice(0, half), text.slice(half)]) {
        if (piece) {
          sseEvent(res, "content_block_delta", { index, delta: { type: "text_delta", text: piece } });
        }
      }
    } else if (block.type === "tool_use") {
      sseEvent(res, "content_block_start", {
        index,
        content_block: { type: "tool_use", id: block.id, name: block.name, input: {} },
      });
      const json = JSON.stringify(block.input);
      for (let at = 0; at < json.length; at += 7) {
        sseEvent(res, "content_block_delta", {
          index,
          delta: { type: "input_json_delta", partial_json: json.slice(at, at + 7) },
        });
      }
    } else {
      throw new Error(`mock_anthropic: unknown block type ${block.type}`);
    }
    sseEvent(res, "content_block_stop", { index });
  });
  sseEvent(res, "message_delta", {
    delta: { stop_reason: reply.stop_reason, stop_sequence: null },
    usage: { output_tokens: 12 },
  });
  sseEvent(res, "message_stop", {});
  res.end();
}

function jsonMessage(res, body, reply) {
  const out = {
    id: `msg_mock_${++messageSerial}`,
    type: "message",
    role: "assistant",
    model: body.model ?? "claude-mock",
    content: reply.content,
    stop_reason: reply.stop_reason,
    stop_sequence: null,
    usage: { ...usage(body), output_tokens: 12 },
  };
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(out));
}

// Starts the server. Resolves to { url, port, requests, unexpected, messages(), close() }, where
// messages() are the recorded /v1/messages request bodies.
export async function startMockAnthropic({ respond, log = () => {} }) {
  const requests = [];
  const unexpected = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      let body = null;
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {
        body = { unparsed: raw };
      }
      const path = (req.url ?? "").split("?")[0];
      const entry = { method: req.method, url: req.url, path, headers: req.headers, body };
      requests.push(entry);
      log(`mock: ${req.method} ${req.url}`);
      try {
        if (req.method === "POST" && path === "/v1/messages") {
          const reply = respond(body, api);
          if (body?.stream) {
            streamMessage(res, body, reply);
          } else {
            jsonMessage(res, body, reply);
          }
        } else if (req.method === "POST" && path === "/v1/messages/count_tokens") {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ input_tokens: usage(body ?? {}).input_tokens }));
        } else if ((req.method === "HEAD" || req.method === "GET") && path === "/") {
          res.writeHead(200, { "content-type": "text/plain" });
          res.end(req.method === "HEAD" ? undefined : "mock anthropic\n");
        } else {
          unexpected.push(entry);
          log(`mock: unexpected ${req.method} ${req.url}`);
          res.writeHead(404, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              type: "error",
              error: { type: "not_found_error", message: `mock: no ${req.method} ${path}` },
            }),
          );
        }
      } catch (err) {
        unexpected.push({ ...entry, error: String(err) });
        log(`mock: script error on ${req.url}: ${err}`);
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ type: "error", error: { type: "api_error", message: String(err) } }));
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  const api = {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    unexpected,
    messages: () => requests.filter((r) => r.path === "/v1/messages").map((r) => r.body),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
  return api;
}

// The text of a tool_result block's content (a string or a list of text blocks).
export function toolResultText(block) {
  if (typeof block.content === "string") return block.content;
  return (block.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

// The tool_result blocks of the last user message of a request body.
export function lastToolResults(body) {
  const last = body?.messages?.at(-1);
  if (!last || last.role !== "user" || typeof last.content === "string") return [];
  return last.content.filter((b) => b.type === "tool_result");
}

// A script for one tool call: when a request offers `toolName` and its last message carries no
// tool_result, the model calls the tool with `input`; when the tool_result comes back, the model
// answers with text that quotes it. Requests that do not offer the tool (Claude Code's side
// requests, if any) get a short text answer. Results seen are pushed to `seen`.
export function oneToolCallScript({ toolName, input, seen }) {
  let calls = 0;
  return (body) => {
    const offered = (body?.tools ?? []).some((t) => t.name === toolName);
    if (!offered) return { content: [{ type: "text", text: "ok" }], stop_reason: "end_turn" };
    const results = lastToolResults(body);
    if (results.length === 0) {
      calls += 1;
      return {
        content: [
          { type: "text", text: "Calling the tool." },
          { type: "tool_use", id: `toolu_mock_${calls}`, name: toolName, input },
        ],
        stop_reason: "tool_use",
      };
    }
    for (const r of results) seen.push(r);
    const quoted = results.map(toolResultText).join("\n");
    return {
      content: [{ type: "text", text: `FINAL ANSWER. The tool said: ${quoted}` }],
      stop_reason: "end_turn",
    };
  };
}
