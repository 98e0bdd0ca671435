#!/bin/sh
# Builds the policy parser fuzz target with clang + libFuzzer (+ ASan/UBSan) and fuzzes a copy of
# the seed corpus for a bounded time. CTest test `policy_parser_fuzz` (label fuzz).
#
# Usage: run_libfuzzer.sh SOURCE_DIR WORK_DIR [extra libFuzzer flags...]
# Environment: CXX_FUZZ (default clang++), FUZZ_SECONDS (default 30).
# Exit: 0 no finding; 77 skipped (no clang / no libFuzzer; reason printed); other: build failure
# or a finding (the crashing input is kept in WORK_DIR/artifacts/).
set -eu

if [ $# -lt 2 ]; then
  echo "usage: $0 SOURCE_DIR WORK_DIR [libFuzzer flags...]" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
work=$2
shift 2
cxx=${CXX_FUZZ:-clang++}
if [ ! -f "$src/policy/parser.cc" ]; then
  echo "error: $src does not look like the cagent source tree (no policy/parser.cc)" >&2
  exit 2
fi
seconds=${FUZZ_SECONDS:-30}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "SKIPPED: $cxx not found (install clang, or set CXX_FUZZ to a clang++ with libFuzzer)"
  exit 77
fi

mkdir -p "$work/obj" "$work/artifacts"

# Can this compiler build and link a libFuzzer binary with the sanitizers at all?
probe="$work/probe.cc"
cat >"$probe" <<'PROBE'
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }
PROBE
if ! "$cxx" -std=c++20 -fsanitize=fuzzer,address,undefined "$probe" -o "$work/probe" \
    >"$work/probe.log" 2>&1; then
  echo "SKIPPED: $cxx cannot link with -fsanitize=fuzzer,address,undefined (libFuzzer missing?):"
  sed 's/^/  /' "$work/probe.log" | head -n 5
  exit 77
fi

flags="-std=c++20 -I$src -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=undefined"

# Only what the parser target needs (the front end and the common library), compiled in parallel,
# into an archive so that only the objects the target uses are linked.
rm -f "$work/obj/"*.o "$work/libpolicy_fuzz.a"
pids=""
for f in "$src"/policy/source.cc "$src"/policy/diagnostics.cc "$src"/policy/lexer.cc \
         "$src"/policy/parser.cc "$src"/common/*.cc; do
  obj="$work/obj/$(basename "$(dirname "$f")")_$(basename "$f" .cc).o"
  echo "compiling $f"
  "$cxx" $flags -fsanitize=fuzzer-no-link,address,undefined -c "$f" -o "$obj" &
  pids="$pids $!"
done
for p in $pids; do wait "$p"; done
ar rcs "$work/libpolicy_fuzz.a" "$work/obj/"*.o
"$cxx" $flags -fsanitize=fuzzer,address,undefined "$src/tests/fuzz/policy_parser_fuzz.cc" \
  "$work/libpolicy_fuzz.a" -o "$work/policy_parser_fuzz"

# Fuzz a copy: libFuzzer writes new inputs into its corpus directory, and the checked-in seeds
# must not change under a test run.
corpus="$work/corpus"
rm -rf "$corpus"
mkdir -p "$corpus"
cp "$src/tests/fuzz/corpus/policy_parser/"* "$corpus/"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
echo "fuzzing for ${seconds}s: $work/policy_parser_fuzz $corpus"
exec "$work/policy_parser_fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
  -dict="$src/tests/fuzz/policy_parser.dict" -artifact_prefix="$work/artifacts/" \
  -print_final_stats=1 "$@" "$corpus"
