#!/usr/bin/env bash
# `cagent batch slurm` and `cagent batch k8s` as commands, without a cluster: a stand-in sbatch on
# PATH records what it is given. The task file is checked before anything is submitted or
# written (exit 2, the line named, no DIR, sbatch never called); the script sbatch gets is the
# --dry-run script, kept as DIR/_slurm-batch.sh; the job id is alone on stdout; a missing,
# refusing or garbled sbatch is exit 1 with a message. The real Slurm is tests/batch/slurm_test.sh.
#
# usage: tests/batch/cluster_cli_test.sh CAGENT_BINARY
set -euo pipefail
cagent=$(realpath "${1:?usage: cluster_cli_test.sh CAGENT_BINARY}")
tmp=$(mktemp -d /tmp/cagent-cluster-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {  # NAME CONDITION...
  local name=$1
  shift
  if "$@"; then
    echo "ok: $name"
  else
    echo "FAIL: $name"
    failures=$((failures + 1))
  fi
}

mkdir -p "$tmp/repos/calc" "$tmp/bin" "$tmp/nobin"
printf 'Fix add.\n' >"$tmp/task.md"
line() { printf '{"id": "%s", "repo": "repos/calc", "task_file": "task.md", "profile": "backend"}\n' "$1"; }
{ line a; line b; line c; } >"$tmp/tasks.jsonl"
# The stand-in: records its arguments and the script, answers as SBATCH_ANSWER says.
cat >"$tmp/bin/sbatch" <<'EOF'
#!/bin/sh
printf '%s\n' "$@" >"$STUB_LOG/args"
cp "$2" "$STUB_LOG/script"
case ${SBATCH_ANSWER:-ok} in
  ok) echo "4711;cagenttest" ;;
  refuse) echo "sbatch: error: invalid partition specified" >&2; exit 1 ;;
  garbage) echo "Submitted batch job" ;;
esac
EOF
chmod +x "$tmp/bin/sbatch"
export STUB_LOG=$tmp
run() {  # OUT ERR ARGS...: cagent with the stand-in first on PATH; sets $status
  local out=$1 err=$2
  shift 2
  status=0
  PATH="$tmp/bin:$PATH" "$cagent" "$@" >"$out" 2>"$err" || status=$?
}

# ---- a submission ----
run "$tmp/out" "$tmp/err" batch slurm "$tmp/tasks.jsonl" --results "$tmp/res dir" --array-limit 2
check "submitted: exit 0" [ "$status" -eq 0 ]
check "the job id alone on stdout" [ "$(cat "$tmp/out")" = 4711 ]
check "how to watch it on stderr" grep -q "squeue -j 4711" "$tmp/err"
check "DIR created" test -d "$tmp/res dir"
check "sbatch got --parsable and the kept script" \
  [ "$(tr '\n' ' ' <"$tmp/args")" = "--parsable $tmp/res dir/_slurm-batch.sh " ]
"$cagent" batch slurm "$tmp/tasks.jsonl" --results "$tmp/res dir" --array-limit 2 --dry-run \
  >"$tmp/dry.sh"
check "the script submitted is the --dry-run script" cmp -s "$tmp/script" "$tmp/dry.sh"
check "and it is kept in DIR" cmp -s "$tmp/script" "$tmp/res dir/_slurm-batch.sh"
check "the array covers the three tasks, two at once" grep -qx '#SBATCH --array=0-2%2' "$tmp/script"

# ---- refusals before anything is submitted ----
rm -f "$tmp/args"
{ line a; echo '{"id": "b", "repo": "repos/none", "task": "x", "profile": "backend"}'; } >"$tmp/bad.jsonl"
run "$tmp/out" "$tmp/err" batch slurm "$tmp/bad.jsonl" --results "$tmp/bad-res"
check "a bad task file: exit 2" [ "$status" -eq 2 ]
check "the bad line named" grep -q "bad.jsonl:2" "$tmp/err"
check "no DIR for a bad task file" test ! -e "$tmp/bad-res"
check "sbatch not called for a bad task file" test ! -e "$tmp/args"
run "$tmp/out" "$tmp/err" batch slurm "$tmp/tasks.jsonl" --results "$tmp/p-res" \
  --partition 'debug
#SBATCH --uid=0'
check "a hostile partition: exit 2" [ "$status" -eq 2 ]
check "a hostile partition: no DIR, no sbatch" test ! -e "$tmp/p-res" -a ! -e "$tmp/args"
run "$tmp/out" "$tmp/err" batch slurm "$tmp/tasks.jsonl" --results "$tmp/d-res" --dry-run
check "--dry-run creates no DIR and calls no sbatch" test ! -e "$tmp/d-res" -a ! -e "$tmp/args"

# ---- sbatch missing, refusing, garbled: exit 1 with a message ----
status=0
PATH="$tmp/nobin" "$cagent" batch slurm "$tmp/tasks.jsonl" --results "$tmp/n-res" \
  >"$tmp/out" 2>"$tmp/err" || status=$?
check "sbatch missing: exit 1" [ "$status" -eq 1 ]
check "sbatch missing: says so" grep -q "not found on PATH" "$tmp/err"
SBATCH_ANSWER=refuse run "$tmp/out" "$tmp/err" batch slurm "$tmp/tasks.jsonl" --results "$tmp/r-res"
check "sbatch refusing: exit 1, its message passed on" \
  [ "$status" -eq 1 -a -n "$(grep 'invalid partition' "$tmp/err")" ]
SBATCH_ANSWER=garbage run "$tmp/out" "$tmp/err" batch slurm "$tmp/tasks.jsonl" --results "$tmp/g-res"
check "sbatch printing no job id: exit 1" [ "$status" -eq 1 -a -n "$(grep 'no job id' "$tmp/err")" ]

# ---- k8s: -o FILE or stdout, a bad --volume ----
run "$tmp/out" "$tmp/err" batch k8s "$tmp/tasks.jsonl" --image img:1 --results-pvc res \
  --volume "data:$tmp" -o "$tmp/m.json"
check "k8s -o FILE: exit 0, nothing on stdout" [ "$status" -eq 0 -a ! -s "$tmp/out" ]
check "k8s -o FILE: says how to apply it" grep -q "kubectl apply -f" "$tmp/err"
run "$tmp/out" "$tmp/err" batch k8s "$tmp/tasks.jsonl" --image img:1 --results-pvc res \
  --volume "data:$tmp"
check "k8s to stdout: the same manifest" cmp -s "$tmp/out" "$tmp/m.json"
run "$tmp/out" "$tmp/err" batch k8s "$tmp/tasks.jsonl" --image img:1 --results-pvc res --volume data
check "k8s --volume without :PATH: exit 2" [ "$status" -eq 2 -a -n "$(grep CLAIM:PATH "$tmp/err")" ]
run "$tmp/out" "$tmp/err" batch k8s "$tmp/tasks.jsonl" --image 'img:1 --privileged' --results-pvc res \
  --volume "data:$tmp"
check "k8s hostile image: exit 2" [ "$status" -eq 2 ]

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo PASS
