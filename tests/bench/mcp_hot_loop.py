#!/usr/bin/env python3
"""One MCP stdio session, one tools/call after another (no interleaving, a minimal client).

  tests/bench/mcp_hot_loop.py [--tool read_file|run_command] [--calls N] -- cagent mcp serve ...

Prints p50, p90 and min of the round trip in milliseconds. The workspace must hold notes.txt (at
least 20 lines) for read_file; at most 400 read_file calls. docs/performance.md, "MCP tool calls", compares it with the SDK client's figures.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", choices=["read_file", "run_command"], default="read_file")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("give the server's command after --")
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    def recv():
        line = p.stdout.readline()
        if not line:
            sys.exit("the server closed its output")
        return json.loads(line)

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                     "clientInfo": {"name": "mcp_hot_loop", "version": "1"}}})
    recv()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    lat = []
    for i in range(1, a.calls + 1):
        # Every call is a new one: loop detection refuses the third identical call in a session.
        args = ({"path": "notes.txt", "offset": 1 + i % 20, "limit": 1 + (i // 20) % 20}
                if a.tool == "read_file" else {"command": "true %d" % i})
        t = time.perf_counter()
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": a.tool, "arguments": args}})
        r = recv()
        lat.append((time.perf_counter() - t) * 1000)
        if "error" in r or r.get("result", {}).get("isError"):
            sys.exit("call %d failed: %s" % (i, json.dumps(r)[:300]))
    lat.sort()
    print("%s: p50 %.3f ms, p90 %.3f ms, min %.3f ms (%d calls)" %
          (a.tool, statistics.median(lat), lat[int(len(lat) * 0.9)], lat[0], len(lat)))
    p.stdin.close()
    p.wait()


if __name__ == "__main__":
    main()
