#!/usr/bin/env bash
# `cagent batch run` against running the same tasks one by one (issue #21): N replayed demo tasks
# (examples/fix-add: the replay model, so no provider; each task is a whole `cagent run` — pin,
# workspace, agent in its sandbox, capture, verification in a fresh sandbox), run
#
#   serial    a shell loop of `cagent run`, one task after the other (what a user does today)
#   jobs=J    `cagent batch run TASKS --jobs J`, for each J given
#
# alternated round by round so a noisy neighbour hits every configuration alike. Reports, per
# configuration, the median wall time, tasks per second, and the per-task cost (wall time / N);
# and batch's own fixed cost per task at --jobs 1 against the serial loop. Every task of every
# round must end completed and verified, or the round is reported as failed (exit 1): a broken
# batch is never timed as a fast one.
#
# usage: tests/bench/batch_bench.sh [BUILD_DIR] [--tasks N] [--jobs "1 2 4"] [--rounds R]
#                                   [--json FILE] [--markdown FILE]
set -euo pipefail
prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
die() { echo "$prog: $1" >&2; exit "${2:-2}"; }

build_dir=build tasks=64 jobs_list="1 2 4" rounds=3 json= markdown=
while (($#)); do
  case $1 in
    --tasks) tasks=${2:?}; shift 2 ;;
    --jobs) jobs_list=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --json) json=$(realpath -m -- "${2:?}"); shift 2 ;;
    --markdown) markdown=$(realpath -m -- "${2:?}"); shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build_dir=$1; shift ;;
  esac
done
cagent=$(realpath -- "$build_dir")/launcher/cagent
[ -x "$cagent" ] || die "$cagent is not built (cmake --build $build_dir)"
command -v python3 >/dev/null || die "python3 is needed (the demo's test, and the statistics)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cagent-batch-bench-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
demo=$src/examples/fix-add
repo=$tmp/repo
cp -R "$demo/repo/." "$repo/"
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m "calc with a bug"
for ((i = 0; i < tasks; i++)); do
  printf '{"id":"t%03d","repo":"%s","task_file":"%s","profile":"fix-add","model":"replay:%s"}\n' \
    "$i" "$repo" "$demo/task.md" "$demo/session.jsonl"
done > "$tmp/tasks.jsonl"

# The environment of every configuration alike: its own state and cache, nothing of the caller's.
run_env() { env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$tmp/home" LANG=C.UTF-8 \
  XDG_STATE_HOME="$1/state" XDG_CACHE_HOME="$1/cache" XDG_CONFIG_HOME="$tmp/config" "${@:2}"; }
now() { python3 -c 'import time; print(time.monotonic())'; }

serial() {  # DIR: every task with `cagent run`, one after the other; prints the seconds
  local dir=$1 t0 t1 i ok=0
  mkdir -p "$dir"
  t0=$(now)
  for ((i = 0; i < tasks; i++)); do
    (cd "$repo" && run_env "$dir" "$cagent" run --profile fix-add --model "replay:$demo/session.jsonl" \
      --approve never -q --json "$demo/task.md") > "$dir/r$i.json" 2> "$dir/r$i.err" && ok=$((ok + 1)) || true
  done
  t1=$(now)
  [ "$ok" = "$tasks" ] || { echo "$prog: serial: $ok of $tasks runs completed and verified" >&2; return 1; }
  python3 -c "print($t1 - $t0)"
}

batch() {  # DIR J: `cagent batch run` with J jobs; prints the seconds
  local dir=$1 j=$2 t0 t1
  mkdir -p "$dir"
  t0=$(now)
  (cd "$repo" && run_env "$dir" "$cagent" batch run "$tmp/tasks.jsonl" --results "$dir/results" \
    --jobs "$j") > "$dir/out" 2> "$dir/err" || {
    echo "$prog: batch --jobs $j failed:" >&2; tail -n 20 "$dir/err" >&2; return 1; }
  t1=$(now)
  local good
  good=$(run_env "$dir" "$cagent" batch report "$dir/results" --json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(sum(1 for t in r["rows"] if t.get("status")=="completed" and t.get("verified")))')
  [ "$good" = "$tasks" ] || { echo "$prog: batch --jobs $j: $good of $tasks verified" >&2; return 1; }
  python3 -c "print($t1 - $t0)"
}

echo "$prog: $tasks tasks, $rounds rounds; serial and --jobs $jobs_list (cores: $(nproc))" >&2
results=$tmp/times
: > "$results"
for ((r = 1; r <= rounds; r++)); do
  s=$(serial "$tmp/r$r-serial") || exit 1
  echo "serial $s" >> "$results"
  echo "  round $r: serial ${s}s" >&2
  for j in $jobs_list; do
    b=$(batch "$tmp/r$r-j$j" "$j") || exit 1
    echo "jobs=$j $b" >> "$results"
    echo "  round $r: --jobs $j ${b}s" >&2
  done
  rm -rf "$tmp"/r"$r"-*
done

commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$results" "$tasks" "$commit" "$(nproc)" "$json" "$markdown" <<'EOF'
import json, statistics, sys
path, n, commit, cores, json_out, md_out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
times = {}
for line in open(path):
    k, v = line.split()
    times.setdefault(k, []).append(float(v))
order = ["serial"] + sorted((k for k in times if k != "serial"), key=lambda k: int(k.split("=")[1]))
serial = statistics.median(times["serial"])
rows = []
for k in order:
    m = statistics.median(times[k])
    rows.append({"config": k, "rounds": len(times[k]), "median_s": round(m, 3),
                 "tasks_per_s": round(n / m, 2), "per_task_ms": round(1000 * m / n, 1),
                 "speedup_vs_serial": round(serial / m, 2)})
j1 = next((r for r in rows if r["config"] == "jobs=1"), None)
fixed = None if j1 is None else round(j1["per_task_ms"] - rows[0]["per_task_ms"], 1)
report = {"commit": commit, "cores": int(cores), "tasks": n, "rows": rows,
          "batch_fixed_cost_per_task_ms_at_jobs_1": fixed}
lines = [f"{n} replayed demo tasks, commit {commit}, {cores} cores; medians of {rows[0]['rounds']} rounds.", "",
         "| configuration | wall time | tasks/s | per task | vs serial |", "|---|---|---|---|---|"]
for r in rows:
    name = "one by one (`cagent run` loop)" if r["config"] == "serial" else f"`batch run --jobs {r['config'].split('=')[1]}`"
    lines.append(f"| {name} | {r['median_s']:.2f} s | {r['tasks_per_s']:.1f} | {r['per_task_ms']:.0f} ms | {r['speedup_vs_serial']:.2f}× |")
if fixed is not None:
    lines += ["", f"batch's own cost per task at --jobs 1 (against the loop): {fixed:+.0f} ms."]
text = "\n".join(lines)
print(text)
if json_out:
    open(json_out, "w").write(json.dumps(report, indent=2) + "\n")
if md_out:
    open(md_out, "w").write(text + "\n")
EOF
