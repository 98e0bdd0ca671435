#!/usr/bin/env bash
# `cagent batch slurm` on a real Slurm: a single-node cluster from Debian's slurm-wlm and munge,
# its daemons started here without systemd (a private munge socket and key, private ports, every
# state, spool, pid and log file in a temporary directory; no cgroup plugin, as this machine's
# cgroup v2 delegates no controllers). An array of demo-style tasks (examples/fix-add, the model
# replayed) is submitted with `cagent batch slurm`: three complete verified, one fails
# verification (its repository has a second bug the recorded session does not fix), one is
# cancelled with `scancel JOB_INDEX` while its agent is running a command. `cagent batch report`
# must give each its status; then the same task file runs locally with `cagent batch run` (its
# slow task cancelled the same way, with SIGTERM once the others are done) and the two reports,
# with what differs between any two runs (times, run ids, paths) removed, must be the same.
#
# usage: tests/batch/slurm_test.sh CAGENT_BINARY SOURCE_DIR
# Exit 77 (skipped) when Slurm or munge is not installed, or not run as root (slurmd runs jobs as
# their user), unless CAGENT_REQUIRE_SLURM=1 (CI), where that is a failure.
# CAGENT_SLURM_TEST_KEEP=1 keeps the temporary directory; CAGENT_SLURM_PROCTRACK (default
# linuxproc) picks Slurm's process tracking (below).
set -euo pipefail
cagent=$(realpath "${1:?usage: slurm_test.sh CAGENT_BINARY SOURCE_DIR}")
src=$(realpath "${2:?usage: slurm_test.sh CAGENT_BINARY SOURCE_DIR}")

say() { echo "slurm_test: $*"; }
skip_or_fail() {
  if [ -n "${CAGENT_REQUIRE_SLURM:-}" ]; then
    echo "FAIL: $* (CAGENT_REQUIRE_SLURM is set: install slurm-wlm and munge, run as root)"
    exit 1
  fi
  echo "SKIP: $* (apt-get install slurm-wlm munge, as root; CAGENT_REQUIRE_SLURM=1 makes this a failure)"
  exit 77
}
for prog in slurmctld slurmd munged sbatch squeue scancel sinfo scontrol; do
  command -v "$prog" >/dev/null || skip_or_fail "$prog is not installed"
done
[ "$(id -u)" -eq 0 ] || skip_or_fail "not root: slurmd must be able to run jobs as their user"
for prog in python3 git; do
  command -v "$prog" >/dev/null || { echo "FAIL: $prog is not installed"; exit 1; }
done

tmp=$(mktemp -d /tmp/cagent-slurm-test-XXXXXX)
chmod 755 "$tmp"
daemons=()
failed=0
print_logs() {
  local f
  for f in "$tmp"/log/*; do
    [ -f "$f" ] || continue
    echo "---- $f (last 40 lines)"
    tail -n 40 "$f"
  done
}
cleanup() {
  local status=$?
  set +e
  if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then print_logs; fi
  # Jobs first (their slurmstepd outlives slurmd), then the daemons this test started.
  if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
    scancel --quiet --user=root 2>/dev/null
    for _ in $(seq 1 60); do
      [ -z "$(squeue -h 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  local pid
  for pid in "${daemons[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${daemons[@]}"; do wait "$pid" 2>/dev/null; done
  if [ -n "${CAGENT_SLURM_TEST_KEEP:-}" ]; then
    echo "slurm_test: kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$status"
}
trap cleanup EXIT
fail() {
  failed=1
  echo "FAIL: $*"
  exit 1
}

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

# ---- munge: a fresh key and a private socket ----
mkdir -p "$tmp/munge" "$tmp/munge-key" "$tmp/log" "$tmp/state" "$tmp/spool"
chmod 755 "$tmp/munge"  # the socket's directory: reachable by every user
chmod 700 "$tmp/munge-key"
dd if=/dev/urandom of="$tmp/munge-key/munge.key" bs=1024 count=1 status=none
chmod 600 "$tmp/munge-key/munge.key"
socket=$tmp/munge/munge.socket
munged -F --socket="$socket" --key-file="$tmp/munge-key/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" \
  --seed-file="$tmp/munge/munged.seed" >"$tmp/log/munged.out" 2>&1 &
daemons+=($!)
wait_for 20 test -S "$socket" || fail "munged did not create its socket"

# ---- slurm.conf: one node (this host), private ports, everything under $tmp ----
# proctrack/linuxproc (default; what clusters without cgroup tracking use): scancel's SIGTERM
# reaches every process of the job, one after the other — cagent batch run, its child cagent run
# and the sandboxed agent. The agent may die, and the broker see its connection go, before cagent
# run handles its own SIGTERM; cagent run still records the run cancelled (agent_session.cc, and
# tests/e2e/run_test.cc's ATerminateSignalThatReachesTheAgentFirstStillCancelsTheRun). Before
# that fix this test failed about one run in six here. CAGENT_SLURM_PROCTRACK=pgid signals only
# the job's process group (the batch script's cagent, which passes it on).
node=$(hostname -s)
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
cpus=$(nproc)
export SLURM_CONF=$tmp/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=cagenttest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/${CAGENT_SLURM_PROCTRACK:-linuxproc}
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=3600
KillWait=60
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=cagenttest Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i >"$tmp/log/slurmctld.out" 2>&1 &
daemons+=($!)
slurmd -D -N "$node" >"$tmp/log/slurmd.out" 2>&1 &
daemons+=($!)
node_idle() { [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ]; }
wait_for 60 node_idle || fail "the node did not come up idle within 60 s (sinfo: $(sinfo 2>&1))"
say "Slurm is up: node $node, $cpus CPUs, slurmctld on port $ctld_port"

# ---- the tasks: demo repositories (examples/fix-add), the recorded session replayed ----
make_repo() {  # NAME [still-failing]
  local dir=$tmp/repos/$1
  mkdir -p "$dir"
  cp -R "$src/examples/fix-add/repo/." "$dir/"
  if [ "${2:-}" = still-failing ]; then
    # A second bug the recorded session does not touch: verification still fails.
    sed -i 's/return a \* b/return a + b/' "$dir/calc.py"
    grep -q 'return a + b' "$dir/calc.py" || fail "could not plant the second bug"
  fi
  git -C "$dir" init -q -b main
  git -C "$dir" add -A
  git -C "$dir" -c user.name=test -c user.email=test@example.invalid commit -q -m "calc with a bug"
}
make_repo ok-1
make_repo ok-2
make_repo ok-3
make_repo still-failing still-failing
make_repo slow
# The slow task's agent runs a command that waits; the marker finds that process (it is running,
# not pending, when it is cancelled).
marker=cagent-slurm-slow-$$-$RANDOM
cat >"$tmp/slow-session.jsonl" <<EOF
{"text": "Running the tests first.", "tool_calls": [{"id": "call_1", "name": "run_command", "arguments": {"command": "python3 -c 'import time; time.sleep(900)' $marker"}}]}
{"tool_calls": [{"id": "call_2", "name": "finish", "arguments": {"summary": "unreachable"}}]}
EOF
# The task file's paths must stay beneath its task root (--task-root "$tmp" here, which holds the
# repositories, the sessions and the task; the tasks directory's "repos" is a symlink into it).
cp "$src/examples/fix-add/session.jsonl" "$src/examples/fix-add/task.md" "$tmp/"
session=$tmp/session.jsonl
task=$tmp/task.md
line() {  # ID MODEL_FILE
  printf '{"id": "%s", "repo": "repos/%s", "task_file": "%s", "profile": "repos/%s/.cagent/fix-add.cagent", "model": "replay:%s"}\n' \
    "$1" "$1" "$task" "$1" "$2"
}
# The task file and the results live in directories with spaces (paths reach the script quoted).
mkdir -p "$tmp/the tasks"
ln -s ../repos "$tmp/the tasks/repos"  # relative: RESOLVE_BENEATH refuses an absolute link
tasks="$tmp/the tasks/tasks.jsonl"
{
  line ok-1 "$session"
  line slow "$tmp/slow-session.jsonl"
  line ok-2 "$session"
  line still-failing "$session"
  line ok-3 "$session"
} >"$tasks"
slow_index=1
export XDG_STATE_HOME=$tmp/state-slurm XDG_CONFIG_HOME=$tmp/config XDG_CACHE_HOME=$tmp/cache

# ---- a bad task file: line-numbered error, exit 2, nothing submitted ----
printf '%s\n{"id": "bad"}\n' "$(line ok-1 "$session")" >"$tmp/the tasks/bad.jsonl"
status=0
"$cagent" batch slurm "$tmp/the tasks/bad.jsonl" --results "$tmp/bad results" --task-root "$tmp" \
  >"$tmp/bad.out" 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "a bad task file: exit $status, expected 2: $(cat "$tmp/bad.out")"
grep -q 'bad.jsonl:2' "$tmp/bad.out" || fail "the error does not name line 2: $(cat "$tmp/bad.out")"
[ ! -e "$tmp/bad results" ] || fail "a bad task file created the results directory"
[ -z "$(squeue -h)" ] || fail "a bad task file submitted a job"

# ---- --dry-run: the script, nothing submitted, no directory ----
# '%' is special in Slurm's file name patterns and '$' to a shell: both must reach cagent as they are.
results="$tmp/slurm results \$HOME 100%"
"$cagent" batch slurm "$tasks" --results "$results" --array-limit 2 --time 10 \
  --account lab-1 --qos normal --task-root "$tmp" --dry-run >"$tmp/dry.sh"
grep -qx '#SBATCH --array=0-4%2' "$tmp/dry.sh" || fail "dry run: no array line: $(cat "$tmp/dry.sh")"
for line in '#SBATCH --time=10' '#SBATCH --account=lab-1' '#SBATCH --qos=normal'; do
  grep -qx -- "$line" "$tmp/dry.sh" || fail "dry run: no '$line' line: $(cat "$tmp/dry.sh")"
done
grep -qF "exec '$cagent' batch run '$tasks' --results '$results' --task-root '$tmp' --index" "$tmp/dry.sh" ||
  fail "dry run: not the per-task command: $(cat "$tmp/dry.sh")"
[ ! -e "$results" ] || fail "--dry-run created the results directory"
[ -z "$(squeue -h)" ] || fail "--dry-run submitted a job"

# ---- the array ----
start=$SECONDS
job=$("$cagent" batch slurm "$tasks" --results "$results" --array-limit 2 --time 10 --task-root "$tmp")
[[ "$job" =~ ^[0-9]+$ ]] || fail "batch slurm printed '$job', not a job id"
say "submitted job $job"
# The time limit reached Slurm as sbatch read it: 10 minutes for each array task.
limit=$(scontrol show job "${job}_0" | grep -o 'TimeLimit=[0-9:-]*' | head -1)
[ "$limit" = TimeLimit=00:10:00 ] || fail "Slurm gives array task 0 '$limit', not 10 minutes"
slow_running() { pgrep -f -- "$marker" >/dev/null; }
slow_started_or_over() { slow_running || [ -z "$(squeue -h -j "${job}_$slow_index" 2>/dev/null)" ]; }
wait_for 180 slow_started_or_over && slow_running ||
  fail "the slow task's command never ran (squeue: $(squeue 2>&1); its output: $(cat "$results/_slurm-${job}_$slow_index.out" 2>&1))"
state=$(squeue -h -j "${job}_$slow_index" -o %T)
[ "$state" = RUNNING ] || fail "the slow task is $state, not RUNNING, when cancelled"
scancel "${job}_$slow_index"
say "cancelled ${job}_$slow_index while its agent ran a command"
array_done() { [ -z "$(squeue -h -j "$job" 2>/dev/null)" ]; }
wait_for 600 array_done || fail "the array did not end within 600 s (squeue: $(squeue 2>&1))"
say "the array ended after $((SECONDS - start)) s"
! slow_running || fail "the slow task's command outlived its cancelled job"
# Slurm's own view of each array task.
declare -a job_state
for i in 0 1 2 3 4; do
  job_state[i]=$(scontrol show job "${job}_$i" | grep -o 'JobState=[A-Z_]*' | head -1)
done
[ "${job_state[slow_index]}" = JobState=CANCELLED ] ||
  fail "Slurm says the cancelled task is ${job_state[slow_index]}"
for i in 0 2 4; do
  [ "${job_state[i]}" = JobState=COMPLETED ] || fail "array task $i is ${job_state[i]}"
done
for i in 0 1 2 3 4; do
  [ -f "$results/_slurm-${job}_$i.out" ] || fail "no output file for array task $i"
done

# ---- the report ----
"$cagent" batch report "$results" --json >"$tmp/slurm-report.json" ||
  [ -s "$tmp/slurm-report.json" ] || fail "batch report failed on the Slurm results"

# The report's tasks as {id: status}, and the report without what differs between two runs of
# the same tasks (times, run ids, paths, hosts) for the comparison below.
python3 - "$tmp/slurm-report.json" >"$tmp/slurm-status.txt" <<'EOF' || fail "cannot read the report"
import json, sys
report = json.load(open(sys.argv[1]))
for row in report["rows"]:
    # The reason's first word says which step ended the task ("verification: ...").
    why = (row.get("reason") or "-").split(":")[0].split(" ")[0]
    print(row["id"], row["status"], "verified" if row["verified"] else "unverified",
          f"exit={row['exit_status']}", why)
EOF
cat "$tmp/slurm-status.txt"
expect_status() {  # FILE ID STATUS VERIFIED EXIT WHY
  grep -qx "$2 $3 $4 exit=$5 $6" "$1" ||
    fail "$(basename "$1"): task $2 is not '$3 $4 exit=$5 $6': $(grep "^$2 " "$1" || echo missing)"
}
expect_status "$tmp/slurm-status.txt" ok-1 completed verified 0 -
expect_status "$tmp/slurm-status.txt" ok-2 completed verified 0 -
expect_status "$tmp/slurm-status.txt" ok-3 completed verified 0 -
expect_status "$tmp/slurm-status.txt" still-failing failed unverified 1 verification
expect_status "$tmp/slurm-status.txt" slow cancelled unverified 130 cancelled

# ---- the same task file, locally with cagent batch run ----
export XDG_STATE_HOME=$tmp/state-local
local_results="$tmp/local results"
"$cagent" batch run "$tasks" --results "$local_results" --jobs 2 --task-root "$tmp" >"$tmp/local.out" 2>&1 &
batch_pid=$!
others_done() {
  local id
  for id in ok-1 ok-2 ok-3 still-failing; do
    [ -f "$local_results/$id/result.json" ] || return 1
  done
  slow_running
}
wait_for 300 others_done || fail "the local batch did not get to its slow task (output: $(cat "$tmp/local.out"))"
# The slow task is cancelled the way Slurm cancelled it: SIGTERM to the cagent running it.
kill -TERM "$batch_pid"
wait "$batch_pid" || true
"$cagent" batch report "$local_results" --json >"$tmp/local-report.json" ||
  [ -s "$tmp/local-report.json" ] || fail "batch report failed on the local results"

normalize() {
  python3 - "$1" <<'EOF'
import json, sys
# What differs between two runs of one task file by nature (cagent batch report --help): where,
# when, how long, which run on which host.
volatile = {"results_dir", "wall_time_ms", "run_id", "run_dir", "host", "finished_at"}
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in sorted(v.items()) if k not in volatile}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v
print(json.dumps(clean(json.load(open(sys.argv[1]))), indent=1, sort_keys=True))
EOF
}
normalize "$tmp/slurm-report.json" >"$tmp/slurm-report.norm"
normalize "$tmp/local-report.json" >"$tmp/local-report.norm"
if ! diff -u "$tmp/local-report.norm" "$tmp/slurm-report.norm"; then
  fail "batch run and batch slurm reports differ (above: - local, + Slurm)"
fi
# Not vacuous: five rows compared, and a change in one row's reason is seen (the twin).
[ "$(grep -c '"id":' "$tmp/slurm-report.norm")" -eq 5 ] || fail "the report does not hold 5 rows"
sed 's/cancelled by the operator/cancelled by someone else/' "$tmp/slurm-report.norm" >"$tmp/twin.norm"
! diff -q "$tmp/local-report.norm" "$tmp/twin.norm" >/dev/null ||
  fail "twin: the comparison did not see a changed reason"
say "the Slurm and local reports agree: $(tr '\n' ' ' <"$tmp/slurm-status.txt")"
echo "PASS"
