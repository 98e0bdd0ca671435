#!/usr/bin/env bash
# clang-tidy over the product's translation units (common/, policy/, agent/, launcher/), every
# finding an error (.clang-tidy has the checks and why some are left out). CI's lint stage runs it.
#
# Usage: tests/lint/tidy.sh BUILD_DIR [--deep] [FILE.cc...]
#   BUILD_DIR  a tree configured for clang, for its compile_commands.json:
#                cmake -S . -B build-tidy -DCMAKE_CXX_COMPILER=clang++ -DCAGENT_PCH=OFF \
#                  -DCAGENT_SELINUX=OFF -DBUILD_TESTING=OFF -DCAGENT_BUILD_BENCHMARKS=OFF
#   --deep     the static analyzer in its default (deep) mode. Without it the analyzer runs
#              shallow: about a fifth of the time (launcher/egress/proxy.cc: 26 s against 119 s),
#              fewer paths per function and less inlining, which still follows a null pointer
#              into a small callee.
#   FILE.cc    only these files (default: every product .cc that git tracks)
# Environment: TIDY_JOBS files at once (default: the number of CPUs).
# Exit: 0 clean; 1 a finding (printed with its check's name); 2 usage.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: $0 BUILD_DIR [--deep] [FILE.cc...]" >&2
  exit 2
fi
build=$1
shift
if [ ! -f "$build/compile_commands.json" ]; then
  echo "error: $build/compile_commands.json does not exist (configure the tree first; see $0)" >&2
  exit 2
fi
mode=shallow
if [ "${1:-}" = --deep ]; then
  mode=deep
  shift
fi
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -d '' files < <(git ls-files -z 'common/*.cc' 'policy/*.cc' 'agent/*.cc' 'launcher/*.cc')
fi
echo "clang-tidy: ${#files[@]} file(s), analyzer $mode, ${TIDY_JOBS:-$(nproc)} at a time"
# clang-tidy's "N warnings generated." (the suppressed ones, in system headers) is left out.
printf '%s\0' "${files[@]}" |
  xargs -0 -P"${TIDY_JOBS:-$(nproc)}" -n4 clang-tidy -p "$build" --quiet --warnings-as-errors='*' \
    --extra-arg=-Xclang --extra-arg=-analyzer-config --extra-arg=-Xclang \
    --extra-arg="mode=$mode" 2>&1 | sed -u '/^[0-9]* warnings\{0,1\} generated\.$/d' ||
  { echo "clang-tidy: findings above (each an error)" >&2; exit 1; }
echo "clang-tidy: clean"
