#!/usr/bin/env bash
# Every performance figure of docs/performance.md's summary table, each side by side with its peer
# in the same run, in one command. Medians and ratios; a report, never a pass/fail on timings.
#
# usage: tests/bench/run-all.sh [BUILD_DIR] [--quick] [--json FILE] [--update-doc FILE]
#
#   BUILD_DIR         the CMake build directory (default: build), with cagent, cagent-agent and
#                     the benchmark tools built (cmake --build build)
#   --quick           fewer rounds, and the slow build workload left out: a few minutes, for CI.
#                     Ratios only; the published table comes from a full run
#   --json FILE       write every figure (and what each part measured) as JSON
#   --update-doc FILE replace the summary table of FILE (docs/performance.md), between its
#                     "<!-- summary:begin -->" and "<!-- summary:end -->" lines, with this run's
#
# The parts, in order (each is a script or tool of this directory, with its own --help):
#
#   launch          launch_latency.sh: `cagent exec -- /bin/true` vs bwrap with the same view,
#                   as the caller; and as nobody (--as-nobody) when run as root
#   version         `cagent --version` vs `bwrap --version` (cagent_bench_compare)
#   per-command     `cagent exec -- true` beside sandbox-runtime's `srt true` and Codex's
#                   `codex sandbox true`, each where it is installed (tests/bench/peers:
#                   npm ci there); a peer that is not installed is reported as such
#   broker          cagent_bench_broker: decision round trip with the audit log on
#   engine          cagent_bench_policy: decisions per second, mixed and shell lines
#   file walk       overhead.sh --workload walk (and build, without --quick): bare vs every layer
#   memory          peak RSS of the cagent process itself over `cagent run` on the demo (the
#                   replay model; examples/fix-add), read by peak_rss.py from /proc
#
# Exit status: 0 done (whatever the figures); 1 a part failed (its message says which: a sandbox
# that fails is never timed as a fast one); 2 usage error or a missing prerequisite.
set -euo pipefail

prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
die() {
  echo "$prog: $1" >&2
  exit "${2:-2}"
}

build_dir=build
quick=0
json=
update_doc=
while (($#)); do
  case $1 in
    --quick) quick=1; shift ;;
    --json) json=${2:?--json needs a file}; shift 2 ;;
    --update-doc) update_doc=${2:?--update-doc needs a file}; shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build_dir=$1; shift ;;
  esac
done
build_dir=$(realpath -- "$build_dir")
[[ -z $json ]] || json=$(realpath -m -- "$json")
[[ -z $update_doc ]] || update_doc=$(realpath -- "$update_doc")
cagent=$build_dir/launcher/cagent
compare=$build_dir/tests/bench/cagent_bench_compare
broker=$build_dir/tests/bench/cagent_bench_broker
policy=$build_dir/tests/bench/cagent_bench_policy
for f in "$cagent" "$build_dir/agent/cagent-agent" "$compare" "$broker"; do
  [[ -x $f ]] || die "'$f' is not built; build first: cmake --build $build_dir"
done
command -v bwrap > /dev/null || die "bubblewrap (bwrap) is not installed; it is the launch baseline"
command -v python3 > /dev/null || die "python3 is not installed (it summarizes the results)"

if ((quick)); then
  launch_runs=15 version_runs=30 peer_runs=5 broker_args=(--requests 2000 --repetitions 3)
  engine_time=0.1 walk_runs=5 rss_runs=3 workloads=walk
else
  launch_runs=50 version_runs=80 peer_runs=15 broker_args=(--requests 20000 --repetitions 7)
  engine_time=0.5 walk_runs=20 rss_runs=10 workloads=all
fi

tmp=$(mktemp -d /tmp/cagent-run-all.XXXXXX)
trap 'rm -rf -- "$tmp"' EXIT
chmod 0755 "$tmp"
part() { echo "== $prog: $1" >&2; }

part "launch latency, as $(id -un)"
"$here/launch_latency.sh" "$build_dir" --runs "$launch_runs" --json "$tmp/launch.json"
if ((EUID == 0)); then
  part "launch latency, as nobody"
  "$here/launch_latency.sh" "$build_dir" --runs "$launch_runs" --as-nobody \
    --json "$tmp/launch-nobody.json"
fi

part "--version"
(cd / && env -i PATH=/usr/bin:/bin "$compare" --runs "$version_runs" --json "$tmp/version.json" \
  --cmd "bwrap|$(command -v bwrap) --version" --cmd "cagent|$cagent --version")

part "per-command cost beside other sandboxes"
ws=$tmp/ws
mkdir "$ws"
peers=(--cmd "cagent|$cagent exec --quiet --workspace $ws -- /bin/true")
peer_notes=()
# Codex refuses to put its helper links under the temporary directory, so the peers get a HOME
# of their own and a TMPDIR inside it (the build tree may itself be under /tmp).
peer_home=$build_dir/bench-peers-home
rm -rf -- "$peer_home"
mkdir -p "$peer_home/tmp"
peer_env=(env -i PATH=/usr/bin:/bin HOME="$peer_home" TMPDIR="$peer_home/tmp")
srt=$here/peers/node_modules/.bin/srt
if [[ -x $srt ]] && (cd "$ws" && "${peer_env[@]}" "$srt" /bin/true) > /dev/null 2>&1; then
  peers+=(--cmd "srt|$srt /bin/true")
else
  peer_notes+=("srt: not installed or cannot run here (npm ci in tests/bench/peers; it needs bwrap, socat and ripgrep)")
fi
codex=$here/peers/node_modules/.bin/codex
if [[ -x $codex ]] && (cd "$ws" && "${peer_env[@]}" "$codex" sandbox /bin/true) > /dev/null 2>&1; then
  peers+=(--cmd "codex|$codex sandbox /bin/true")
else
  peer_notes+=("codex: not installed or cannot run here (npm ci in tests/bench/peers)")
fi
# A peer that fails in the middle (cagent_bench_compare stops at the first failing run) must not
# lose the rest of the report: the part is run again with cagent alone, and the note says why.
if ! (cd "$ws" && "${peer_env[@]}" "$compare" --runs "$peer_runs" --warmup 1 \
  --json "$tmp/peers.json" "${peers[@]}"); then
  peer_notes+=("srt, codex: a peer failed during the measurement (its message is above)")
  (cd "$ws" && "${peer_env[@]}" "$compare" --runs "$peer_runs" --warmup 1 \
    --json "$tmp/peers.json" "${peers[@]:0:2}")
fi
rm -rf -- "$peer_home"
printf '%s\n' "${peer_notes[@]}" > "$tmp/peer-notes.txt"

part "broker decision round trip (audit log on)"
"$broker" "${broker_args[@]}" | tee "$tmp/broker.txt"

part "policy engine"
if [[ -x $policy ]]; then
  "$policy" --benchmark_filter='BM_Decide(Mixed|Shell)$' --benchmark_min_time="$engine_time" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_format=json --benchmark_out="$tmp/engine.json" --benchmark_out_format=json \
    > /dev/null
else
  echo "cagent_bench_policy is not built (Google Benchmark missing)" > "$tmp/engine-missing.txt"
fi

part "file walk overhead (every layer)"
"$here/overhead.sh" "$build_dir" --runs "$walk_runs" --workload "$workloads" --json "$tmp/walk.json"

part "peak RSS of cagent over cagent run (the demo)"
repo=$tmp/repo
cp -R "$src/examples/fix-add/repo/." "$repo/"
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m base
# Of the cagent process itself (peak_rss.py reads its VmHWM): wait4's ru_maxrss would report the
# largest of cagent and everything it waited for (the demo's verification runs python3).
(cd "$repo" && env -i PATH=/usr/bin:/bin HOME="$tmp/home" python3 "$here/peak_rss.py" \
  --runs "$rss_runs" --json "$tmp/rss.json" -- "$cagent" run --json --profile fix-add \
  --approve never --model "replay:$src/examples/fix-add/session.jsonl" \
  "$src/examples/fix-add/task.md")

commit=$(git -C "$src" rev-parse --short HEAD 2> /dev/null || echo unknown)
dirty=$(git -C "$src" status --porcelain --untracked-files=no 2> /dev/null | head -1)
python3 "$here/run_all_summary.py" --dir "$tmp" --commit "$commit${dirty:+ (with uncommitted changes)}" \
  --quick "$quick" ${json:+--json "$json"} ${update_doc:+--update-doc "$update_doc"}
