#!/usr/bin/env bash
# Hardening overhead: real, syscall-heavy workloads run bare and inside `cagent exec` with every
# layer on, interleaved, through cagent_bench_compare; the result is the ratio of the medians.
# See docs/performance.md ("Hardening overhead") for what is measured and how to read the tables.
#
# usage: tests/bench/overhead.sh [BUILD_DIR] [--runs N] [--warmup N] [--json FILE] [--as-nobody]
#                                [--workload walk|build|all] [--split]
#
#   BUILD_DIR    the CMake build directory (default: build); needs launcher/cagent and
#                tests/bench/cagent_bench_compare built in it
#   --runs N     measured runs per command and workload (default 30; at least 20 for the
#                published numbers)
#   --warmup N   warm-up rounds, run but not recorded (default 3)
#   --json FILE  also write the results as JSON: {"walk": {...}, "build": {...}}, each object
#                what cagent_bench_compare --json writes
#   --as-nobody  (as root) run the benchmark as uid/gid 65534 on copies of the binaries in /tmp,
#                which is how users run cagent: unprivileged, user namespace built from nothing
#   --workload W walk, build or all (default all)
#   --split      also time cagent with only seccomp off and with only Landlock off, to tell the
#                two filters apart (two more commands: the run takes 5/3 as long)
#
# The workloads, each a /bin/sh script in a temporary workspace that cds to the workspace itself
# (cagent_bench_compare runs argv without a shell):
#
#   walk   find /usr/include -type f -print0 | xargs -0 cat > /dev/null
#          every header of the host (22,518 files here): a directory walk, then openat, fstat,
#          fadvise64, read, close per file; ~236,000 system calls of which ~25,000 openat, in
#          ~0.55 s of wall time here. Deliberately the worst case: almost nothing but syscalls.
#   build  make -s clean, then make -s -j2 of a generated C project (40 modules and a main, each
#          including stdio.h, stdlib.h, string.h; -O2), linked into one program that is run:
#          ~90,000 system calls (most of them failing readlink and openat of the include
#          search), 2.7 s of CPU, ~1.4 s of wall time here
#
# The commands, interleaved round by round (bare first: it is the baseline of the ratios):
#
#   bare               /bin/sh SCRIPT
#   cagent             cagent exec --quiet --workspace WS -- /bin/sh SCRIPT   (every layer)
#   cagent-nofilters   the same with --disable-layer seccomp --disable-layer landlock: namespaces,
#                      view, rlimits, capabilities, but neither filter
#   cagent-noseccomp   (--split) only seccomp off
#   cagent-nolandlock  (--split) only Landlock off
#
# Both sides get the same environment: env -i PATH=/usr/bin:/bin for the benchmark, and the
# scripts set PATH, HOME and TMPDIR themselves (TMPDIR in the workspace: cagent's /tmp is a
# tmpfs, the host's need not be, and the compiler's temporary files must land on the same
# filesystem on both sides).
#
# Exit status: 0 done; 1 a command failed (the message names it); 2 usage error or a missing
# prerequisite (cc, make, the binaries, root for --as-nobody).
set -euo pipefail

prog=${0##*/}
die() {
  echo "$prog: $1" >&2
  exit "${2:-2}"
}

build_dir=build
runs=30
warmup=3
json=
as_nobody=0
workload=all
split=0
while (($#)); do
  case $1 in
    --runs) runs=${2:?--runs needs a value}; shift 2 ;;
    --warmup) warmup=${2:?--warmup needs a value}; shift 2 ;;
    --json) json=${2:?--json needs a value}; shift 2 ;;
    --as-nobody) as_nobody=1; shift ;;
    --workload) workload=${2:?--workload needs a value}; shift 2 ;;
    --split) split=1; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build_dir=$1; shift ;;
  esac
done
case $workload in
  walk) workloads=(walk) ;;
  build) workloads=(build) ;;
  all) workloads=(walk build) ;;
  *) die "--workload must be walk, build or all, got '$workload'" ;;
esac

cagent=$build_dir/launcher/cagent
compare=$build_dir/tests/bench/cagent_bench_compare
[[ -x $cagent ]] || die "'$cagent' not found; build first: cmake -S . -B $build_dir && \
make -C $build_dir -j\$(nproc) cagent cagent_bench_compare"
[[ -x $compare ]] || die "'$compare' not found; build it: make -C $build_dir cagent_bench_compare \
(needs -DCAGENT_BUILD_BENCHMARKS=ON, the default)"
for tool in /usr/bin/cc /usr/bin/make /usr/bin/find /usr/bin/xargs; do
  [[ -x $tool ]] || die "'$tool' is missing; the workloads need it (Debian/Ubuntu: apt-get install \
build-essential findutils)"
done
[[ -d /usr/include ]] || die "/usr/include is missing; the walk workload reads it"
[[ -z $json ]] || json=$(realpath -m -- "$json")  # the benchmark runs from /
if ((as_nobody)) && ((EUID != 0)); then
  die "--as-nobody switches to uid 65534 with setpriv, which needs root; as an unprivileged user \
run without it: the benchmark then already runs unprivileged"
fi

# Everything the benchmark touches lives in one temporary directory: the workspace and, for
# --as-nobody, copies of the binaries (the build tree may not be reachable by nobody).
tmp=$(mktemp -d /tmp/cagent-bench.XXXXXX)
trap 'rm -rf -- "$tmp"' EXIT
chmod 0755 "$tmp"
ws=$tmp/workspace
mkdir "$ws"
ws=$(realpath "$ws")  # cagent binds the workspace at its canonical path

# ---- The workspace: two scripts and a C project ----

# Common prologue: the same PATH, HOME and TMPDIR bare and sandboxed (cagent sets its own HOME,
# TMPDIR=/tmp on a tmpfs and a longer PATH; the bare side inherits env -i's).
prologue="cd '$ws' || exit 1
export PATH=/usr/bin:/bin HOME='$ws' TMPDIR='$ws/tmp'
"
mkdir "$ws/tmp"

cat >"$ws/walk.sh" <<EOF
${prologue}find /usr/include -type f -print0 | xargs -0 cat > /dev/null
EOF

cat >"$ws/build.sh" <<EOF
${prologue}cd proj || exit 1
make -s clean || exit 1
make -s -j2 all || exit 1
./app > /dev/null
EOF

# The C project: 40 modules of a few functions each (string hashing, qsort over a table,
# snprintf), all including the usual libc headers and one project header, and a main that calls
# every module. Each compile runs cc, cc1, as; the link runs collect2 and ld.
modules=40
proj=$ws/proj
mkdir -p "$proj/src" "$proj/include"
{
  echo '#ifndef BENCH_COMMON_H'
  echo '#define BENCH_COMMON_H'
  echo '#include <stddef.h>'
  echo 'struct bench_rec { int id; double weight; char name[32]; };'
  echo 'unsigned bench_hash(const char *s, unsigned seed);'
  for ((i = 0; i < modules; i++)); do
    printf 'long mod%02d_run(int seed);\n' "$i"
  done
  echo '#endif'
} >"$proj/include/common.h"
for ((i = 0; i < modules; i++)); do
  m=$(printf '%02d' "$i")
  cat >"$proj/src/mod$m.c" <<EOF
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

#define N_$m (64 + $i)
static struct bench_rec table_${m}[N_$m];

static int by_weight_$m(const void *a, const void *b) {
  const struct bench_rec *x = a, *y = b;
  return (x->weight > y->weight) - (x->weight < y->weight);
}

static int by_name_$m(const void *a, const void *b) {
  return strcmp(((const struct bench_rec *)a)->name, ((const struct bench_rec *)b)->name);
}

static void fill_$m(int seed) {
  for (int k = 0; k < N_$m; k++) {
    table_${m}[k].id = k;
    snprintf(table_${m}[k].name, sizeof table_${m}[k].name, "rec-%d-%d-%d", $i, seed,
             k * 7919 % N_$m);
    table_${m}[k].weight = (double)bench_hash(table_${m}[k].name, (unsigned)seed) / 4294967296.0;
  }
}

static long checksum_$m(void) {
  long sum = 0;
  for (int k = 0; k < N_$m; k++) {
    sum = sum * 31 + table_${m}[k].id;
    sum ^= (long)strlen(table_${m}[k].name) << (k % 13);
  }
  return sum;
}

static char *describe_$m(int k) {
  char *buf = malloc(96);
  if (buf == NULL) return NULL;
  snprintf(buf, 96, "%s weighs %.6f (module $i)", table_${m}[k].name, table_${m}[k].weight);
  return buf;
}

long mod${m}_run(int seed) {
  fill_$m(seed);
  qsort(table_$m, N_$m, sizeof table_${m}[0], by_weight_$m);
  long a = checksum_$m();
  qsort(table_$m, N_$m, sizeof table_${m}[0], by_name_$m);
  long b = checksum_$m();
  char *d = describe_$m(seed % N_$m);
  long c = d ? (long)bench_hash(d, 0) : 0;
  free(d);
  return a ^ (b << 1) ^ c;
}
EOF
done
{
  echo '#include <stdio.h>'
  echo '#include "common.h"'
  echo 'unsigned bench_hash(const char *s, unsigned seed) {'
  echo '  unsigned h = 2166136261u ^ seed;'
  echo '  while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;'
  echo '  return h;'
  echo '}'
  echo 'int main(void) {'
  echo '  long total = 0;'
  for ((i = 0; i < modules; i++)); do
    printf '  total ^= mod%02d_run(%d);\n' "$i" "$i"
  done
  printf '%s\n' '  printf("%ld\n", total);'
  echo '  return 0;'
  echo '}'
} >"$proj/src/main.c"
cat >"$proj/Makefile" <<'EOF'
CC = /usr/bin/cc
CFLAGS = -O2 -Wall -Iinclude
SRCS = $(wildcard src/*.c)
OBJS = $(SRCS:src/%.c=obj/%.o)

all: app

app: $(OBJS)
	$(CC) -o $@ $(OBJS)

obj/%.o: src/%.c include/common.h | obj
	$(CC) $(CFLAGS) -c -o $@ $<

obj:
	mkdir -p obj

clean:
	rm -rf obj app

.PHONY: all clean
EOF

if ((as_nobody)); then
  install -m 0755 "$cagent" "$tmp/cagent"
  install -m 0755 "$compare" "$tmp/cagent_bench_compare"
  cagent=$tmp/cagent
  compare=$tmp/cagent_bench_compare
  chown -R 65534:65534 "$ws"
  run_as=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
else
  cagent=$(realpath "$cagent")
  compare=$(realpath "$compare")
  run_as=()
fi

# The commands, as NAME|ARGV for cagent_bench_compare (split on spaces: no path may contain one;
# mktemp's template guarantees that for the workspace).
commands() {
  local script=$ws/$1.sh
  local c="$cagent exec --quiet --workspace $ws"
  echo "bare|/bin/sh $script"
  echo "cagent|$c -- /bin/sh $script"
  echo "cagent-nofilters|$c --disable-layer seccomp --disable-layer landlock -- /bin/sh $script"
  if ((split)); then
    echo "cagent-noseccomp|$c --disable-layer seccomp -- /bin/sh $script"
    echo "cagent-nolandlock|$c --disable-layer landlock -- /bin/sh $script"
  fi
}

# Fail before timing anything if a workload fails bare or sandboxed, with its own message.
cd /
for w in "${workloads[@]}"; do
  while IFS= read -r spec; do
    read -r -a argv <<<"${spec#*|}"
    if ! err=$(env -i PATH=/usr/bin:/bin "${run_as[@]}" "${argv[@]}" 2>&1 >/dev/null); then
      die "the $w workload fails here, so it cannot be benchmarked:
  ${argv[*]}
$err" 1
    fi
  done < <(commands "$w")
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
echo "# cagent hardening overhead: workloads bare and inside cagent exec (every layer)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "kernel:  $(uname -srm)"
echo "cpu:     ${cpu:-unknown} ($(nproc) online CPUs)"
echo "cagent:  $("$cagent" --version) ($cagent)"
if ((as_nobody)); then
  echo "user:    nobody (uid 65534, via setpriv)"
else
  echo "user:    $(id -un) (uid $EUID)"
fi
echo "layers:  $(env -i PATH=/usr/bin:/bin "${run_as[@]}" "$cagent" exec --quiet --json-fd 3 \
  --workspace "$ws" -- /bin/true 3>&1 >/dev/null | sed -n 's/.*"details":{\([^}]*\)}.*/\1/p')"
echo "cc:      $(/usr/bin/cc --version | head -n1); $(make --version | head -n1)"
echo "walk:    find /usr/include -type f -print0 | xargs -0 cat > /dev/null \
($(find /usr/include -type f | wc -l) files)"
echo "build:   make -s clean; make -s -j2 all; ./app ($modules modules + main, -O2)"
echo "workspace: $ws"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min averages, before)"
echo

if [[ -n $json ]]; then
  ((as_nobody)) && chown 65534:65534 "$tmp"
fi
for w in "${workloads[@]}"; do
  echo "## $w"
  cmd_args=()
  while IFS= read -r spec; do
    cmd_args+=(--cmd "$spec")
  done < <(commands "$w")
  json_arg=()
  [[ -z $json ]] || json_arg=(--json "$tmp/$w.json")
  # A minimal, identical environment for every command; stdio is /dev/null inside compare.
  env -i PATH=/usr/bin:/bin "${run_as[@]}" "$compare" --runs "$runs" --warmup "$warmup" \
    "${json_arg[@]}" "${cmd_args[@]}"
  echo
done
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (after)"

if [[ -n $json ]]; then
  {
    echo '{'
    sep=
    for w in "${workloads[@]}"; do
      printf '%s"%s": ' "$sep" "$w"
      cat -- "$tmp/$w.json"
      sep=', '
    done
    echo '}'
  } >"$json"
  echo "JSON written to $json"
fi
