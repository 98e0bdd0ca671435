#!/usr/bin/env bash
# The harness's own cost per model turn and per tool call in `cagent run`: the time that is not
# spent in the model. See docs/performance.md ("cagent run: harness overhead").
#
# usage: tests/bench/run_overhead.sh [BUILD_DIR] [--runs N] [--warmup N] [--calls N] [--json FILE]
#
#   BUILD_DIR    the CMake build directory (default: build); needs launcher/cagent,
#                agent/cagent-agent and tests/bench/cagent_bench_compare built in it
#   --runs N     measured runs per command (default 15)
#   --warmup N   warm-up rounds, run but not recorded (default 2)
#   --calls N    tool calls in the longer sessions (default 200; a multiple of 5)
#   --json FILE  also write what cagent_bench_compare measured, plus the derived costs
#
# The model is the replay provider (a recorded session played back turn by turn), so a turn costs
# what the harness costs: the agent's request over the socket, the broker's budgets and audit
# entries, the replay, the answer, and the agent's bookkeeping. Every session fixes the demo's bug
# first (read calc.py, edit it) and ends with finish, so every run completes and is verified alike;
# the sessions differ only in what comes between:
#
#   base         nothing more                                      3 turns,  2 tool calls
#   turns        N read_file calls, one per turn                 3+N turns, 2+N tool calls
#   batched      N read_file calls, five per turn              3+N/5 turns, 2+N tool calls
#   commands       N run_command 'true', five per turn         3+N/5 turns, 2+N tool calls
#   bare-commands  N x /bin/sh -c true, outside any sandbox (what those commands cost by themselves)
#
# cagent_bench_compare runs the commands interleaved (noise hits all alike) and reports medians.
# From the medians:
#
#   per turn                = (turns - batched) / (N - N/5)      a turn without its tool call
#   per read_file call      = (batched - base - N/5 x per turn) / N
#   per run_command call    = (commands - batched) / N + per read_file call
#                             compared with bare-commands / N, the same command run bare
#
# Each `cagent run` also pays a fixed cost (workspace clone, sandbox, capture, verification); it
# cancels out of the differences and is reported as the base run's median.
#
# Exit status: 0 done; 1 a run failed (the message names it); 2 usage or a missing prerequisite.
set -euo pipefail

prog=${0##*/}
die() {
  echo "$prog: $1" >&2
  exit "${2:-2}"
}

build_dir=build
runs=15
warmup=2
calls=200
json_out=
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  build_dir=$1
  shift
fi
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --warmup) warmup=${2:?}; shift 2 ;;
    --calls) calls=${2:?}; shift 2 ;;
    --json) json_out=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case $calls in
  ''|*[!0-9]*) die "--calls must be a positive multiple of 5" ;;
esac
[ "$calls" -ge 5 ] && [ $((calls % 5)) -eq 0 ] || die "--calls must be a positive multiple of 5"

src=$(cd "$(dirname "$0")/../.." && pwd)
cagent=$build_dir/launcher/cagent
agent=$build_dir/agent/cagent-agent
compare=$build_dir/tests/bench/cagent_bench_compare
for f in "$cagent" "$agent" "$compare"; do
  [ -x "$f" ] || die "$f is not built (cmake --build $build_dir)"
done
command -v git > /dev/null || die "git is not installed"
command -v python3 > /dev/null || die "python3 is not installed (the demo's tests need it)"
cagent=$(cd "$(dirname "$cagent")" && pwd)/cagent

work=$(mktemp -d /tmp/cagent-run-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The demo repository, committed.
cp -r "$src/examples/fix-add/repo" "$work/repo"
git -C "$work/repo" init -q -b main
git -C "$work/repo" add -A
git -C "$work/repo" -c user.name=bench -c user.email=bench@localhost commit -q -m base

# The demo's profile with budgets large enough for the longer sessions.
sed -e "s/model-turns 20/model-turns $((calls + 10))/" \
    -e "s/tool-calls 40/tool-calls $((calls + 10))/" \
    "$work/repo/.cagent/fix-add.cagent" > "$work/bench.cagent"
grep -q "model-turns $((calls + 10))" "$work/bench.cagent" ||
  die "examples/fix-add/repo/.cagent/fix-add.cagent no longer has the limits this script raises"

# Sessions (replay JSON lines: one assistant turn per line).
turn() {  # turn CALL_JSON...
  local IFS=,
  printf '{"text":"","tool_calls":[%s],"usage":{"input_tokens":100,"output_tokens":20}}\n' "$*"
}
call() {  # call ID NAME ARGS_JSON  (ids must be unique within a turn; the replay provider
          # refuses a turn that repeats one)
  printf '{"id":"%s","name":"%s","arguments":%s}' "$1" "$2" "$3"
}
prologue() {
  turn "$(call p1 read_file '{"path":"calc.py"}')"
  turn "$(call p2 edit_file '{"path":"calc.py","old_string":"return a - b","new_string":"return a + b"}')"
}
finish() { turn "$(call f1 finish '{"summary":"fixed add"}')"; }
read_call() { call "$1" read_file '{"path":"test_calc.py"}'; }
cmd_call() { call "$1" run_command '{"command":"true"}'; }
five() {  # five KIND TURN: one turn of five calls
  turn "$("$1" "t$2a")" "$("$1" "t$2b")" "$("$1" "t$2c")" "$("$1" "t$2d")" "$("$1" "t$2e")"
}

{ prologue; finish; } > "$work/base.jsonl"
{
  prologue
  for i in $(seq "$calls"); do turn "$(read_call "t$i")"; done
  finish
} > "$work/turns.jsonl"
{
  prologue
  for i in $(seq $((calls / 5))); do five read_call "$i"; done
  finish
} > "$work/batched.jsonl"
{
  prologue
  for i in $(seq $((calls / 5))); do five cmd_call "$i"; done
  finish
} > "$work/commands.jsonl"

# What the same commands cost bare: run_command runs its string with /bin/sh -c.
printf '#!/bin/sh\nfor i in $(seq %d); do /bin/sh -c true || exit 1; done\n' "$calls" \
  > "$work/bare-commands.sh"
chmod +x "$work/bare-commands.sh"

# Every run is its own `cagent run`; its state (run directories) goes to the temporary directory.
export XDG_STATE_HOME=$work/state
export CAGENT_AGENT_BINARY
CAGENT_AGENT_BINARY=$(cd "$(dirname "$agent")" && pwd)/cagent-agent
run_cmd() {  # run_cmd SESSION
  echo "$1|$cagent run --profile $work/bench.cagent --repo $work/repo --approve never --json --model replay:$work/$1.jsonl $src/examples/fix-add/task.md"
}

# Each session must complete before it is timed (cagent_bench_compare would also refuse a failing
# run, but without saying why).
for s in base turns batched commands; do
  if ! out=$("$cagent" run --profile "$work/bench.cagent" --repo "$work/repo" --approve never --json \
               --model "replay:$work/$s.jsonl" "$src/examples/fix-add/task.md" 2>&1); then
    echo "$out" | tail -20 >&2
    die "the $s session did not complete (above)" 1
  fi
done

echo "$prog: $runs runs (+$warmup warm-up) of the bare baseline and 4 cagent runs, N=$calls" >&2
results=$work/results.json
"$compare" --runs "$runs" --warmup "$warmup" --json "$results" \
  --cmd "bare-commands|$work/bare-commands.sh" \
  --cmd "$(run_cmd base)" --cmd "$(run_cmd turns)" --cmd "$(run_cmd batched)" \
  --cmd "$(run_cmd commands)"

python3 - "$results" "$calls" "${json_out:-}" <<'EOF'
import json, sys
path, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = json.load(open(path))
m = {c["name"]: c["median_ms"] for c in r["commands"]}
k = n // 5
per_turn = (m["turns"] - m["batched"]) / (n - k)
per_read = (m["batched"] - m["base"] - k * per_turn) / n
per_cmd_total = (m["commands"] - m["batched"]) / n + per_read
bare_cmd = m["bare-commands"] / n
derived = {
    "calls": n,
    "fixed_run_ms": m["base"],
    "per_turn_ms": per_turn,
    "per_read_file_ms": per_read,
    "per_run_command_ms": per_cmd_total,
    "bare_command_ms": bare_cmd,
    "run_command_over_bare_ms": per_cmd_total - bare_cmd,
    "run_command_ratio_to_bare": per_cmd_total / bare_cmd if bare_cmd > 0 else None,
}
print()
print("derived from the medians (ms):")
print(f"  fixed cost of a run (clone, sandbox, capture, verify): {m['base']:8.1f}")
print(f"  per model turn (harness only, no tool call):           {per_turn:8.2f}")
print(f"  per read_file call:                                    {per_read:8.2f}")
print(f"  per run_command 'true':                                {per_cmd_total:8.2f}"
      f"  (bare: {bare_cmd:.2f}, ratio {per_cmd_total / bare_cmd:.2f})")
if out:
    r["derived"] = derived
    with open(out, "w") as f:
        json.dump(r, f, indent=2)
EOF
