#!/bin/sh
# Builds fuzz targets with clang + libFuzzer (+ ASan/UBSan) and fuzzes a copy of each one's seed
# corpus for a bounded time. CTest tests `policy_parser_fuzz` and `protocol_decoder_fuzz` (label
# fuzz) run one target each; with no TARGET given, every target runs in turn.
#
# Usage: run_libfuzzer.sh SOURCE_DIR WORK_DIR [TARGET...] [libFuzzer flags (starting with -)...]
#   TARGET: policy_parser | protocol_decoder (default: both, one after the other)
# Environment: CXX_FUZZ (default clang++), FUZZ_SECONDS per target (default 30).
# Exit: 0 no finding; 77 skipped (no clang / no libFuzzer; reason printed); other: build failure
# or a finding (the crashing input is kept in WORK_DIR/<target>/artifacts/).
set -eu

if [ $# -lt 2 ]; then
  echo "usage: $0 SOURCE_DIR WORK_DIR [TARGET...] [libFuzzer flags...]" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
work=$2
shift 2
targets=""
while [ $# -gt 0 ]; do
  case $1 in
    policy_parser | protocol_decoder) targets="$targets $1"; shift ;;
    -*) break ;;
    *) echo "error: unknown fuzz target '$1' (policy_parser, protocol_decoder)" >&2; exit 2 ;;
  esac
done
[ -n "$targets" ] || targets="policy_parser protocol_decoder"
cxx=${CXX_FUZZ:-clang++}
if [ ! -f "$src/policy/parser.cc" ] || [ ! -f "$src/common/protocol.cc" ]; then
  echo "error: $src does not look like the cagent source tree (no policy/parser.cc)" >&2
  exit 2
fi
seconds=${FUZZ_SECONDS:-30}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "SKIPPED: $cxx not found (install clang, or set CXX_FUZZ to a clang++ with libFuzzer)"
  exit 77
fi

mkdir -p "$work"

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
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# build_and_fuzz TARGET "SOURCES" [libFuzzer flags...]: compiles only what the target needs (in
# parallel, into an archive so that only the objects the target uses are linked), then fuzzes a
# copy of its corpus for $seconds.
build_and_fuzz() {
  name=$1
  sources=$2
  shift 2
  dir="$work/$name"
  mkdir -p "$dir/obj" "$dir/artifacts"
  rm -f "$dir/obj/"*.o "$dir/lib.a"
  pids=""
  for f in $sources; do
    obj="$dir/obj/$(basename "$(dirname "$f")")_$(basename "$f" .cc).o"
    echo "compiling $f"
    "$cxx" $flags -fsanitize=fuzzer-no-link,address,undefined -c "$f" -o "$obj" &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p"; done
  ar rcs "$dir/lib.a" "$dir/obj/"*.o
  "$cxx" $flags -fsanitize=fuzzer,address,undefined "$src/tests/fuzz/${name}_fuzz.cc" \
    "$dir/lib.a" -o "$dir/${name}_fuzz"

  # Fuzz a copy: libFuzzer writes new inputs into its corpus directory, and the checked-in seeds
  # must not change under a test run.
  corpus="$dir/corpus"
  rm -rf "$corpus"
  mkdir -p "$corpus"
  cp "$src/tests/fuzz/corpus/$name/"* "$corpus/"
  echo "fuzzing for ${seconds}s: $dir/${name}_fuzz $corpus"
  "$dir/${name}_fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -dict="$src/tests/fuzz/$name.dict" -artifact_prefix="$dir/artifacts/" \
    -print_final_stats=1 "$@" "$corpus"
}

# One target after the other (each is bounded by $seconds); the first finding stops the run.
for t in $targets; do
  case $t in
    policy_parser)
      sources="$src/policy/source.cc $src/policy/diagnostics.cc $src/policy/lexer.cc
               $src/policy/parser.cc $src/common/result.cc" ;;
    protocol_decoder)
      sources="$src/common/protocol.cc $src/common/result.cc $src/common/json_text.cc
               $src/common/text.cc" ;;
  esac
  build_and_fuzz "$t" "$sources" "$@"
done
