#!/usr/bin/env bash
# Launch latency: `cagent exec -- /bin/true` against bubblewrap building the equivalent view, and
# bare /bin/true for reference, interleaved, through cagent_bench_compare. See
# docs/performance.md for what is measured and how to read the table.
#
# usage: tests/bench/launch_latency.sh [BUILD_DIR] [--runs N] [--warmup N] [--json FILE]
#                                      [--as-nobody] [--also NAME=CAGENT_BINARY]...
#
#   BUILD_DIR    the CMake build directory (default: build); needs launcher/cagent and
#                tests/bench/cagent_bench_compare built in it
#   --runs N     measured runs per command (default 60; at least 50 for the published numbers)
#   --warmup N   warm-up rounds, run but not recorded (default 5)
#   --json FILE  also write the results as JSON
#   --as-nobody  (as root) run the benchmark as uid/gid 65534 on copies of the binaries in /tmp,
#                which is how users run cagent: unprivileged, user namespace built from nothing
#   --also NAME=CAGENT_BINARY
#                also time another cagent build (`CAGENT_BINARY exec ... -- /bin/true`) in the
#                same interleaved rounds, e.g. an older commit or a different link mode
#
# Exit status: 0 done; 1 a command failed (the message names it); 2 usage error or a missing
# prerequisite (bubblewrap, the binaries, root for --as-nobody).
set -euo pipefail

prog=${0##*/}
die() {
  echo "$prog: $1" >&2
  exit "${2:-2}"
}

build_dir=build
runs=60
warmup=5
json=
as_nobody=0
also=()
while (($#)); do
  case $1 in
    --runs) runs=${2:?--runs needs a value}; shift 2 ;;
    --warmup) warmup=${2:?--warmup needs a value}; shift 2 ;;
    --json) json=${2:?--json needs a value}; shift 2 ;;
    --as-nobody) as_nobody=1; shift ;;
    --also)
      [[ ${2:-} =~ ^[A-Za-z0-9_.-]+=.+$ ]] || die "--also needs NAME=CAGENT_BINARY, got '${2:-}'"
      also+=("$2"); shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build_dir=$1; shift ;;
  esac
done

bwrap=$(command -v bwrap || true)
[[ -n $bwrap ]] || die "bubblewrap (bwrap) is not installed; it is the baseline of this benchmark. \
Install it (Debian/Ubuntu: apt-get install bubblewrap) and run again." 2
cagent=$build_dir/launcher/cagent
compare=$build_dir/tests/bench/cagent_bench_compare
[[ -x $cagent ]] || die "'$cagent' not found; build first: cmake -S . -B $build_dir && \
make -C $build_dir -j\$(nproc) cagent cagent_bench_compare"
[[ -x $compare ]] || die "'$compare' not found; build it: make -C $build_dir cagent_bench_compare \
(needs -DCAGENT_BUILD_BENCHMARKS=ON, the default)"
[[ -z $json ]] || json=$(realpath -m -- "$json")  # the benchmark runs from /
for a in "${also[@]}"; do
  [[ -x ${a#*=} ]] || die "--also $a: '${a#*=}' is not an executable file"
done
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
if ((as_nobody)); then
  install -m 0755 "$cagent" "$tmp/cagent"
  install -m 0755 "$compare" "$tmp/cagent_bench_compare"
  cagent=$tmp/cagent
  compare=$tmp/cagent_bench_compare
  for i in "${!also[@]}"; do
    install -m 0755 "${also[i]#*=}" "$tmp/also-$i"
    also[i]=${also[i]%%=*}=$tmp/also-$i
  done
  chown 65534:65534 "$ws"
  run_as=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
else
  cagent=$(realpath "$cagent")
  compare=$(realpath "$compare")
  for i in "${!also[@]}"; do
    also[i]=${also[i]%%=*}=$(realpath "${also[i]#*=}")
  done
  run_as=()
fi
ws=$(realpath "$ws")  # cagent binds the workspace at its canonical path; so must bwrap

# bwrap with the view `cagent exec` builds by default (launcher/sandbox/launch_spec.cc DefaultLaunchSpec,
# launcher/sandbox/mountns.cc PrepareMountPlan, launcher/sandbox/sandbox.cc). bwrap applies its options in order,
# so the tmpfs on /tmp comes before the workspace bind inside it, and the hidden paths after the
# /etc bind they cover.
b=("$bwrap"
  # The same namespaces, process attributes and environment.
  --unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --unshare-cgroup
  --hostname cagent --die-with-parent --new-session --cap-drop ALL
  --clearenv --setenv PATH /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  --setenv HOME /home/cagent --setenv TMPDIR /tmp --setenv SHELL /bin/sh)
# System trees read-only; the merged-usr links as links, whatever exists on this host.
for d in /usr /etc /bin /sbin /lib /lib32 /lib64 /libx32 /opt; do
  if [[ -L $d ]]; then
    b+=(--symlink "$(readlink "$d")" "$d")
  elif [[ -d $d ]]; then
    b+=(--ro-bind "$d" "$d")
  fi
done
b+=(--perms 1777 --size $((1 << 30)) --tmpfs /tmp
  --bind "$ws" "$ws"
  --perms 0755 --size $((512 << 20)) --tmpfs /home/cagent
  --proc /proc --ro-bind /proc/sys /proc/sys
  --dev /dev --perms 1777 --size $((64 << 20)) --tmpfs /dev/shm)
# The secrets cagent hides: files under /dev/null, directories under an empty mode-000 tmpfs.
for p in /etc/shadow /etc/gshadow /etc/shadow- /etc/gshadow- /etc/sudoers /etc/sudoers.d \
  /etc/ssh /etc/ssl/private; do
  if [[ -L $p ]]; then
    continue
  elif [[ -d $p ]]; then
    b+=(--perms 0000 --size 4096 --tmpfs "$p" --remount-ro "$p")
  elif [[ -e $p ]]; then
    b+=(--ro-bind /dev/null "$p")
  fi
done
b+=(--remount-ro / --chdir "$ws" /bin/true)

c=("$cagent" exec --workspace "$ws" -- /bin/true)

# Fail before timing anything if either sandbox cannot be built here, with its own message.
cd /
for cmd in b c; do
  declare -n argv=$cmd
  if ! err=$(env -i PATH=/usr/bin:/bin "${run_as[@]}" "${argv[@]}" 2>&1); then
    die "this command fails here, so it cannot be benchmarked:
  ${argv[*]}
$err" 1
  fi
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
echo "# cagent launch latency: cagent exec vs bubblewrap, equivalent view"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "kernel:  $(uname -srm)"
echo "cpu:     ${cpu:-unknown} ($(nproc) online CPUs)"
echo "bwrap:   $("$bwrap" --version)"
echo "cagent:  $("$cagent" --version) ($cagent)"
if ((as_nobody)); then
  echo "user:    nobody (uid 65534, via setpriv)"
else
  echo "user:    $(id -un) (uid $EUID)"
fi
echo "workspace: $ws"
echo "bwrap command:  ${b[*]}"
echo "cagent command: ${c[*]}"
echo

also_cmds=()
for a in "${also[@]}"; do
  also_cmds+=(--cmd "${a%%=*}|${a#*=} exec --workspace $ws -- /bin/true")
done
json_arg=()
if [[ -n $json ]]; then
  json_arg=(--json "$tmp/results.json")
  ((as_nobody)) && chown 65534:65534 "$tmp"
fi
# A minimal, identical environment for every command; stdio is /dev/null inside compare.
env -i PATH=/usr/bin:/bin "${run_as[@]}" "$compare" --runs "$runs" --warmup "$warmup" \
  "${json_arg[@]}" \
  --cmd "bwrap|${b[*]}" \
  --cmd "cagent|${c[*]}" \
  "${also_cmds[@]}" \
  --cmd "bare|/bin/true"
if [[ -n $json ]]; then
  cp -- "$tmp/results.json" "$json"
  echo "JSON written to $json"
fi
