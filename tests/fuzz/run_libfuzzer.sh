#!/usr/bin/env bash
# Fuzzes the libFuzzer targets of a CAGENT_FUZZ build tree for a bounded time, each on a copy of
# its seed corpus with its dictionary. The CTest test `libfuzzer` (label fuzz) runs it over every
# target; CI's fuzz stage runs it directly (.ci/run).
#
# Usage: run_libfuzzer.sh SOURCE_DIR FUZZ_DIR [TARGET...] [libFuzzer flags (starting with -)...]
#   FUZZ_DIR  the tests/fuzz directory of a build tree configured with -DCAGENT_FUZZ=ON and built
#             (target cagent_fuzzers); it holds fuzz_targets.txt and cagent_<name>_fuzzer
#   TARGET    a name from fuzz_targets.txt (default: every one)
# Environment:
#   FUZZ_SECONDS          seconds per target (default 30), wall-clock
#   FUZZ_CPU_SECONDS      stop a target once the fuzzer has used this much CPU time instead
#                         (user + system, read from /proc; its wall-clock limit is then ten times
#                         this): "one CPU-hour" is FUZZ_CPU_SECONDS=3600, exact on a shared machine
#   FUZZ_JOBS             targets fuzzed at once (default 1)
#   FUZZ_MAX_LEN          -max_len (default 4096)
#   CAGENT_SKIP_LIBFUZZER=1  skip: exit 77 at once
# Exit: 0 no finding; 77 skipped (reason printed: asked to, or not a CAGENT_FUZZ tree); 1 a
# finding (the crashing input is kept in FUZZ_DIR/libfuzzer/<target>/artifacts/, and its name is
# printed) or a target that could not run; 2 usage.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 SOURCE_DIR FUZZ_DIR [TARGET...] [libFuzzer flags...]" >&2
  exit 2
fi
if [ "${CAGENT_SKIP_LIBFUZZER:-0}" = 1 ]; then
  echo "SKIPPED: CAGENT_SKIP_LIBFUZZER=1 (CI fuzzes in its own stage, from a CAGENT_FUZZ tree)"
  exit 77
fi
src=$(cd "$1" && pwd)
dir=$(cd "$2" && pwd)
shift 2
if [ ! -f "$dir/fuzz_targets.txt" ]; then
  echo "error: $dir has no fuzz_targets.txt (give the tests/fuzz directory of a build tree)" >&2
  exit 2
fi
mapfile -t known <"$dir/fuzz_targets.txt"
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    -*) break ;;
    *)
      # (A here-string: under pipefail, grep -q leaving early can fail a pipe's writer.)
      if ! grep -qx -- "$1" <<<"$(printf '%s\n' "${known[@]}")"; then
        echo "error: unknown fuzz target '$1' (one of: ${known[*]})" >&2
        exit 2
      fi
      targets+=("$1")
      shift
      ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || for t in "${known[@]}"; do [ -n "$t" ] && targets+=("$t"); done
flags=("$@")

missing=()
for t in "${targets[@]}"; do
  [ -x "$dir/cagent_${t}_fuzzer" ] || missing+=("$t")
done
if [ ${#missing[@]} -eq ${#targets[@]} ]; then
  echo "SKIPPED: no libFuzzer binaries in $dir: this is not a CAGENT_FUZZ tree, or cagent_fuzzers"
  echo "  was not built. Configure one with: cmake -S $src -B build-fuzz"
  echo "  -DCMAKE_CXX_COMPILER=clang++ -DCAGENT_FUZZ=ON -DBUILD_TESTING=OFF, then"
  echo "  cmake --build build-fuzz --target cagent_fuzzers"
  exit 77
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "error: not built: ${missing[*]} (cmake --build ... --target cagent_fuzzers)" >&2
  exit 1
fi

seconds=${FUZZ_SECONDS:-30}
cpu_seconds=${FUZZ_CPU_SECONDS:-}
if [ -n "$cpu_seconds" ]; then
  case $cpu_seconds in
    '' | *[!0-9]*)
      echo "error: FUZZ_CPU_SECONDS must be a whole number of seconds, not '$cpu_seconds'" >&2
      exit 2
      ;;
  esac
  seconds=$((cpu_seconds * 10))
fi
ticks=$(getconf CLK_TCK)
jobs=${FUZZ_JOBS:-1}
max_len=${FUZZ_MAX_LEN:-4096}
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
work="$dir/libfuzzer"

# fuzz_one TARGET: fuzzes a copy of the target's corpus (libFuzzer adds what it finds to the
# corpus directory, and the checked-in seeds must not change under a test run). Output goes to
# WORK/TARGET/log; the exit status is the fuzzer's.
fuzz_one() {
  local t=$1 w="$work/$1"
  rm -rf "$w"
  mkdir -p "$w/corpus" "$w/artifacts"
  cp "$src/tests/fuzz/corpus/$t/"* "$w/corpus/"
  local dict=()
  [ -f "$src/tests/fuzz/$t.dict" ] && dict=("-dict=$src/tests/fuzz/$t.dict")
  "$dir/cagent_${t}_fuzzer" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=2048 "${dict[@]}" -artifact_prefix="$w/artifacts/" -print_final_stats=1 \
    ${flags[@]+"${flags[@]}"} "$w/corpus" >"$w/log" 2>&1 &
  local fuzzer=$! status=0
  [ -z "$cpu_seconds" ] || watch_cpu "$fuzzer" "$w" &
  wait "$fuzzer" || status=$?
  # libFuzzer exits 72 when interrupted; only the CPU budget's own interrupt counts as a clean end.
  if [ "$status" = 72 ] && [ -f "$w/cpu_budget_spent" ]; then
    status=0
  fi
  return "$status"
}

# watch_cpu PID WORK: interrupts the fuzzer (SIGINT: libFuzzer prints its final stats and exits)
# once its user + system time reaches FUZZ_CPU_SECONDS, and marks that it did.
watch_cpu() {
  local pid=$1 w=$2 stat used
  while sleep 5; do
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
    # Fields 14 and 15 (utime, stime), counted after the ") " that ends the command name.
    read -r -a fields <<<"${stat##*) }"
    used=$(((fields[11] + fields[12]) / ticks))
    if [ "$used" -ge "$cpu_seconds" ]; then
      echo "$used" >"$w/cpu_budget_spent"
      kill -INT "$pid" 2>/dev/null || true
      return 0
    fi
  done
}

# A line per target: its verdict, executions and corpus size at the end.
report() {
  local t=$1 status=$2 w="$work/$1"
  local execs units took
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$w/log" | tail -n1)
  # libFuzzer's own "Done N runs in S second(s)": less than the limit when -runs ended it first.
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$w/log" | tail -n1)
  units=$(ls "$w/corpus" | wc -l)
  [ ! -f "$w/cpu_budget_spent" ] || took="$(cat "$w/cpu_budget_spent") CPU-"
  if [ "$status" = 0 ]; then
    printf '  %-18s ok       %10s execs in %ss, corpus %s\n' "$t" "${execs:-?}" "${took:-$seconds}" \
      "$units"
  else
    printf '  %-18s FAILED   exit %s; see %s\n' "$t" "$status" "$w/log"
    for a in "$w/artifacts/"*; do
      [ -e "$a" ] && printf '      finding: %s\n' "$a"
    done
    grep -m3 -E 'ERROR: |runtime error|SUMMARY' "$w/log" | sed 's/^/      /' || true
  fi
}

if [ -n "$cpu_seconds" ]; then
  echo "fuzzing ${#targets[@]} target(s), ${cpu_seconds} CPU-seconds each, ${jobs} at a time (work: $work)"
else
  echo "fuzzing ${#targets[@]} target(s), ${seconds}s each, ${jobs} at a time (work: $work)"
fi
declare -A pid_of=()
declare -A status_of=()
running=0
for t in "${targets[@]}"; do
  while [ "$running" -ge "$jobs" ]; do
    wait -n || true
    for r in "${!pid_of[@]}"; do
      if ! kill -0 "${pid_of[$r]}" 2>/dev/null; then
        wait "${pid_of[$r]}" && status_of[$r]=0 || status_of[$r]=$?
        unset "pid_of[$r]"
        running=$((running - 1))
      fi
    done
  done
  echo "  start $t"
  fuzz_one "$t" &
  pid_of[$t]=$!
  running=$((running + 1))
done
for r in "${!pid_of[@]}"; do
  wait "${pid_of[$r]}" && status_of[$r]=0 || status_of[$r]=$?
done

failed=0
echo "results:"
for t in "${targets[@]}"; do
  report "$t" "${status_of[$t]}"
  [ "${status_of[$t]}" = 0 ] || failed=1
done
if [ "$failed" != 0 ]; then
  echo "FAILED: a fuzz target found an input (kept under $work/<target>/artifacts/); replay it"
  echo "  with cagent_<target>_replay FILE, fix the product code, and add the input to the corpus"
  exit 1
fi
