#!/usr/bin/env python3
"""The summary of tests/bench/run-all.sh: reads what each part wrote into its directory, prints
the table (figure, cagent, peer, ratio, target, met), and optionally writes it as JSON and into
docs/performance.md between "<!-- summary:begin -->" and "<!-- summary:end -->"."""
import argparse
import datetime
import json
import os
import re
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def command(result, name):
    for c in result["commands"]:
        if c["name"] == name:
            return c
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--quick", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--update-doc")
    a = ap.parse_args()
    d = a.dir
    rows = []  # figure, cagent value, peer name, peer value, ratio, target text, met (bool/None)

    def add(figure, value, peer, peer_value, ratio, target, met, note=""):
        rows.append(dict(figure=figure, cagent=value, peer=peer, peer_value=peer_value,
                         ratio=ratio, target=target, met=met, note=note))

    for tag, who in (("launch", "caller"), ("launch-nobody", "nobody")):
        p = os.path.join(d, tag + ".json")
        if not os.path.exists(p):
            continue
        r = load(p)
        b, c = command(r, "bwrap"), command(r, "cagent")
        ratio = c["median_ms"] / b["median_ms"]
        add(f"`cagent exec -- true` vs bwrap, same view, as {who} (ms)",
            c["median_ms"], "bwrap", b["median_ms"], ratio, "≤ 0.6×", ratio <= 0.6)

    r = load(os.path.join(d, "version.json"))
    b, c = command(r, "bwrap"), command(r, "cagent")
    ratio = c["median_ms"] / b["median_ms"]
    add("`cagent --version` vs `bwrap --version` (ms)", c["median_ms"], "bwrap", b["median_ms"],
        ratio, "≤ 1.1×", ratio <= 1.1)

    r = load(os.path.join(d, "peers.json"))
    c = command(r, "cagent")
    for peer in ("srt", "codex"):
        p = command(r, peer)
        if p is None:
            continue
        add(f"per command: `cagent exec -- true` vs `{peer}` (ms)", c["median_ms"], peer,
            p["median_ms"], c["median_ms"] / p["median_ms"], "report", None)
    notes_path = os.path.join(d, "peer-notes.txt")
    peer_notes = [l for l in open(notes_path).read().splitlines() if l] if os.path.exists(
        notes_path) else []

    text = open(os.path.join(d, "broker.txt"), encoding="utf-8").read()
    m = re.search(r"^median\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)", text, re.M)
    if m:
        p50, rate = float(m.group(1)), float(m.group(4))
        add("broker decision round trip, audit on: p50 (µs)", p50, "", None, None, "≤ 25 µs",
            p50 <= 25)
        add("broker decisions per second, audit on", rate, "", None, None, "≥ 40,000",
            rate >= 40000)

    p = os.path.join(d, "engine.json")
    if os.path.exists(p):
        for b in load(p)["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            rate = b["items_per_second"] / 1e6
            if b["run_name"] == "BM_DecideMixed":
                add("policy engine, mixed workload (M decisions/s)", rate, "", None, None,
                    "≥ 2.5 M/s", rate >= 2.5)
            elif b["run_name"] == "BM_DecideShell":
                add("policy engine, shell lines (M decisions/s)", rate, "", None, None,
                    "≥ 2 M/s", rate >= 2.0)

    w = load(os.path.join(d, "walk.json"))
    for work, target in (("walk", 1.05), ("build", 1.01)):
        if work not in w:
            add(f"{work} workload, every layer vs bare", None, "bare", None, None,
                f"≤ {target}×", None, "not run (--quick)")
            continue
        bare, c = command(w[work], "bare"), command(w[work], "cagent")
        ratio = c["median_ms"] / bare["median_ms"]
        add(f"{work} workload, every layer vs bare (ms)", c["median_ms"], "bare",
            bare["median_ms"], ratio, f"≤ {target}×", ratio <= target)

    med = load(os.path.join(d, "rss.json"))["median_kib"]
    mib = med["VmHWM"] / 1024.0
    add("peak RSS of the cagent process over `cagent run` on the demo (MiB)", mib, "", None,
        None, "≤ 8 MB", med["VmHWM"] * 1024 <= 8e6,
        f"anonymous {med['RssAnon'] / 1024:.1f} MiB, file-backed {med['RssFile'] / 1024:.1f}")

    def fmt(v):
        if v is None:
            return "—"
        if v >= 1000:
            return f"{v:,.0f}"
        return f"{v:.2f}" if v < 100 else f"{v:.0f}"

    when = datetime.date.today().isoformat()
    lines = [f"Measured at commit {a.commit} on {when} by `tests/bench/run-all.sh"
             f"{' --quick' if a.quick else ''}` (medians; ratios of medians in the same run).", "",
             "| figure | cagent | peer | ratio | target | met |", "|---|---|---|---|---|---|"]
    for r in rows:
        peer = f"{r['peer']} {fmt(r['peer_value'])}" if r["peer"] and r["peer_value"] else "—"
        ratio = f"{r['ratio']:.2f}×" if r["ratio"] is not None else "—"
        met = {True: "yes", False: "**no**", None: "—"}[r["met"]]
        value = fmt(r["cagent"]) if r["cagent"] is not None else r["note"]
        if r["cagent"] is not None and r["note"]:
            value += f" ({r['note']})"
        lines.append(f"| {r['figure']} | {value} | {peer} | {ratio} | {r['target']} | {met} |")
    for n in peer_notes:
        lines.append("")
        lines.append(f"Not compared: {n}.")
    table = "\n".join(lines)
    print()
    print(table)

    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"commit": a.commit, "date": when, "quick": bool(a.quick), "figures": rows,
                       "not_compared": peer_notes}, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(f"\nJSON written to {a.json}")
    if a.update_doc:
        doc = open(a.update_doc, encoding="utf-8").read()
        begin, end = "<!-- summary:begin -->", "<!-- summary:end -->"
        if begin not in doc or end not in doc:
            print(f"run_all_summary: {a.update_doc} has no {begin} ... {end} block", file=sys.stderr)
            return 1
        head, rest = doc.split(begin, 1)
        _, tail = rest.split(end, 1)
        with open(a.update_doc, "w", encoding="utf-8") as f:
            f.write(head + begin + "\n" + table + "\n" + end + tail)
        print(f"summary table of {a.update_doc} updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
