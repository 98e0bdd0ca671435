#!/usr/bin/python3
"""Summarizes tests/bench/egress_bench.sh's samples: a text table on stdout, optionally JSON.

usage: summarize.py SAMPLES_DIR [--json FILE] [--meta KEY=VALUE]...

SAMPLES_DIR holds one file per measured row and kind:
  latency.MODE   seconds per connection (curl's time_total), one a line
  speed.MODE     bytes per second of one download (curl's speed_download), one a line
MODE is direct, or PROXY-PATH (srt-forward, cagent-connect, ...). Each proxy row is compared
with direct: added latency = its p50 minus direct's p50, throughput ratio = its median over
direct's median. Rows ending in -tls (HTTPS: direct-tls, cagent-tunnel-tls,
cagent-intercept-tls) are compared with direct-tls instead.
"""

import argparse
import json
import os
import statistics
import sys


def read_samples(path):
    with open(path, encoding="utf-8") as f:
        return [float(line) for line in f if line.strip()]


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--json")
    parser.add_argument("--meta", action="append", default=[])
    args = parser.parse_args()

    latency = {}
    speed = {}
    for name in sorted(os.listdir(args.dir)):
        kind, _, mode = name.partition(".")
        if kind == "latency":
            latency[mode] = read_samples(os.path.join(args.dir, name))
        elif kind == "speed":
            speed[mode] = read_samples(os.path.join(args.dir, name))

    preferred = ["direct", "srt-forward", "srt-connect", "cagent-forward", "cagent-connect",
                 "cagent-transparent", "direct-tls", "cagent-tunnel-tls", "cagent-intercept-tls"]

    def base(mode):
        return "direct-tls" if mode.endswith("-tls") else "direct"

    def order(modes):
        return sorted(modes, key=lambda m: (preferred.index(m) if m in preferred else 99, m))

    result = {"meta": dict(kv.split("=", 1) for kv in args.meta), "latency": {},
              "throughput": {}}
    base_p50 = {b: percentile(latency.get(b, []), 0.5) for b in ("direct", "direct-tls")}
    print("Per-connection latency (curl time_total, one new connection per GET of a 24-byte file)")
    print(f"{'path':<20} {'n':>5} {'p50 ms':>9} {'p90 ms':>9} {'added p50 ms':>13} {'ratio':>7}")
    for mode in order(latency):
        v = latency[mode]
        p50, p90 = percentile(v, 0.5), percentile(v, 0.9)
        row = {"n": len(v), "p50_ms": round(p50 * 1e3, 4), "p90_ms": round(p90 * 1e3, 4)}
        added = ratio = ""
        if mode != base(mode) and base(mode) in latency:
            row["added_p50_ms"] = round((p50 - base_p50[base(mode)]) * 1e3, 4)
            row["ratio_p50"] = round(p50 / base_p50[base(mode)], 3)
            added, ratio = f"{row['added_p50_ms']:.3f}", f"{row['ratio_p50']:.2f}"
        result["latency"][mode] = row
        print(f"{mode:<20} {len(v):>5} {p50 * 1e3:>9.3f} {p90 * 1e3:>9.3f} {added:>13} {ratio:>7}")

    base_speed = {b: statistics.median(speed[b]) if speed.get(b) else float("nan")
                  for b in ("direct", "direct-tls")}
    print()
    print("Download throughput (median of the runs)")
    print(f"{'path':<20} {'runs':>5} {'MiB/s':>10} {'min MiB/s':>10} {'of direct':>10}")
    for mode in order(speed):
        v = speed[mode]
        med = statistics.median(v)
        row = {"runs": len(v), "median_bytes_per_s": round(med), "min_bytes_per_s": round(min(v))}
        share = ""
        if mode != base(mode) and base(mode) in speed:
            row["ratio"] = round(med / base_speed[base(mode)], 3)
            share = f"{row['ratio'] * 100:.0f} %"
        result["throughput"][mode] = row
        print(f"{mode:<20} {len(v):>5} {med / 2**20:>10.0f} {min(v) / 2**20:>10.0f} {share:>10}")

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
