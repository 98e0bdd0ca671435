#!/usr/bin/env python3
"""Peak resident set of one process itself, not of its children: runs COMMAND (no shell) RUNS
times and reads /proc/PID/status of that process every millisecond until it exits. VmHWM only
grows, so the last value read is its peak, short of what the process adds in its last
millisecond. wait4's ru_maxrss cannot give this figure: it is the largest of the process and every
descendant it waited for (a test run by `cagent run`'s verification, say).

usage: peak_rss.py [--runs N] [--json FILE] -- COMMAND [ARG...]

Prints, per run and as medians: VmHWM (the peak), and at that moment's last reading RssAnon
(private memory: heap, stacks, relocated data), RssFile (pages of the executable and libraries
mapped from the page cache, shared with every other process that maps them) and Threads.
Exit status: 0; 1 if COMMAND exits non-zero (the run is not reported as a measurement); 2 usage.
"""
import json
import os
import statistics
import subprocess
import sys
import time


def sample(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            fields = {}
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "RssAnon", "RssFile", "Threads"):
                    fields[key] = int(value.split()[0])
            return fields if "VmHWM" in fields else None
    except OSError:
        return None


def main(argv):
    runs, json_path = 5, None
    args = argv[1:]
    while args and args[0] != "--":
        if args[0] == "--runs" and len(args) > 1:
            runs = int(args[1])
            args = args[2:]
        elif args[0] == "--json" and len(args) > 1:
            json_path = args[1]
            args = args[2:]
        else:
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
    if not args or len(args) < 2:
        print("peak_rss.py: missing '-- COMMAND'", file=sys.stderr)
        return 2
    command = args[1:]
    results = []
    for i in range(runs):
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        last = None
        while proc.poll() is None:
            s = sample(proc.pid)
            if s is not None:
                last = s
            time.sleep(0.001)
        if proc.returncode != 0:
            print(f"peak_rss.py: run {i + 1}: {command[0]} exited with {proc.returncode}; "
                  "run it by hand to see why", file=sys.stderr)
            return 1
        if last is None:
            print(f"peak_rss.py: run {i + 1} ended before it could be sampled", file=sys.stderr)
            return 1
        results.append(last)
        print(f"run {i + 1}: peak {last['VmHWM'] / 1024:.1f} MiB (anonymous "
              f"{last.get('RssAnon', 0) / 1024:.1f}, file {last.get('RssFile', 0) / 1024:.1f}, "
              f"{last.get('Threads', 0)} threads)")
    med = {k: statistics.median(r.get(k, 0) for r in results) for k in results[0]}
    print(f"median: peak {med['VmHWM'] / 1024:.1f} MiB, anonymous {med['RssAnon'] / 1024:.1f}, "
          f"file-backed {med['RssFile'] / 1024:.1f}")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump({"command": command, "runs": results, "median_kib": med}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
