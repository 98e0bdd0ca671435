#!/bin/bash
# shellcheck disable=SC2016  # awk programs are single-quoted on purpose; values go in with -v.
# Static assertions on a binary (kernel) SELinux policy that has the cagent module linked in
# (see build_policy.sh), using setools (sesearch, seinfo). Nothing is loaded into the kernel.
#
#   check_policy.sh POLICY FILE_CONTEXTS
#       Run every check on the kernel policy POLICY and the file_contexts file FILE_CONTEXTS (with
#       FILE_CONTEXTS.homedirs beside it) that the same link produced. Exit 0 when all pass, 1 when
#       any fails.
#   check_policy.sh --expect-violations POLICY FILE_CONTEXTS
#       For a deliberately broken variant of the module: exit 0 only when EVERY check fails,
#       which shows that each check can fail. Exit 1 when some check passes anyway.
#
# Exit 2: usage error, missing tool, or a policy in which the checks cannot be evaluated.
#
# Rules are read "effectively": a rule whose source is an attribute of the domain applies to the
# domain (sesearch's default), and a rule whose target is an attribute applies to each of its
# member types (expanded here). Conditional rules carry their condition, e.g.
# "[ cagent_agent_use_loopback ]:True".

set -uo pipefail

readonly AGENT=cagent_agent_t
readonly LAUNCHER=cagent_t
readonly LOOPBACK_BOOL=cagent_agent_use_loopback
readonly REQUIRED_TYPES="cagent_t cagent_exec_t cagent_agent_t cagent_agent_exec_t cagent_run_t
  cagent_workspace_t cagent_log_t cagent_tmpfs_t cagent_config_t"

usage() {
  echo "usage: check_policy.sh [--expect-violations] POLICY FILE_CONTEXTS" >&2
  exit 2
}

error() {
  echo "check_policy.sh: $*" >&2
  exit 2
}

expect_violations=0
if [[ "${1:-}" == --expect-violations ]]; then
  expect_violations=1
  shift
fi
[[ $# -eq 2 ]] || usage
policy="$1"
file_contexts="$2"

PATH="${PATH}:/usr/sbin:/sbin" # selabel_lookup, for unprivileged users
for tool in sesearch seinfo selabel_lookup awk sort; do
  command -v "${tool}" >/dev/null || error "${tool} not found; install setools (sesearch, seinfo)"
done
# seinfo and sesearch fall back to the running system's policy when given none: never let a
# missing file turn into an analysis of something else.
[[ -f "${policy}" && -r "${policy}" ]] || error "cannot read policy ${policy}"
[[ -f "${file_contexts}" && -r "${file_contexts}" ]] || error "cannot read ${file_contexts}"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# The policy path goes first: seinfo options with an optional value (-a, -b, -t, --permissive)
# would take a following bare argument as that value. Each query loads the policy (sesearch takes
# about 2 s), so they run side by side.
query_pids=()
query_names=()
query() {
  local out="$1"
  shift
  "$@" >"${work}/${out}" 2>"${work}/${out}.err" &
  query_pids+=("$!")
  query_names+=("${out}")
}
wait_queries() {
  local i
  for i in "${!query_pids[@]}"; do
    wait "${query_pids[$i]}" ||
      error "query ${query_names[$i]} failed on ${policy}:" \
        "$(cat "${work}/${query_names[$i]}.err" "${work}/${query_names[$i]}")"
  done
  query_pids=()
  query_names=()
}

query types seinfo "${policy}" -t
wait_queries
for t in ${REQUIRED_TYPES}; do
  grep -qx "   ${t}" "${work}/types" ||
    error "type ${t} is not in ${policy}: the cagent module is not linked in, so nothing can be checked"
done

query attrs seinfo "${policy}" -a -x
query bools seinfo "${policy}" -b -x
query permissive seinfo "${policy}" --permissive
query agent_type seinfo "${policy}" -t "${AGENT}" -x
query agent.raw sesearch "${policy}" -A -T -s "${AGENT}"
# The launcher is an unconfined domain: only its rules on cagent's types and on the directories its
# state directory is created in are of interest.
query launcher.raw sesearch "${policy}" -A -T -s "${LAUNCHER}" \
  -t '^(cagent_[a-z_]+_t|user_home_t|xdg_data_t)$' -rt
wait_queries

# Flatten sesearch output into one line per (rule, concrete target type):
#   kind <TAB> target <TAB> class <TAB> perms <TAB> condition <TAB> default <TAB> original rule
# Targets that are attributes are expanded to their member types using seinfo -a -x.
flatten() {
  awk -v OFS='\t' '
    FNR == NR {
      if ($0 ~ /^   attribute [^ ]+;$/) {
        current = $2
        sub(/;$/, "", current)
        is_attr[current] = 1
      } else if ($0 ~ /^\t/) {
        member = $0
        gsub(/[\t ]/, "", member)
        members[current] = members[current] " " member
      }
      next
    }
    {
      rule = $0
      line = $0
      cond = "-"
      if (match(line, / \[ .* \]:(True|False)$/)) {
        cond = substr(line, RSTART + 1)
        line = substr(line, 1, RSTART - 1)
      }
      sub(/;[ ]*$/, "", line)
      n = split(line, f, " ")
      kind = f[1]
      split(f[3], tc, ":")
      target = tc[1]
      class = tc[2]
      perms = "-"
      dflt = "-"
      if (kind == "allow") {
        perms = ""
        for (i = 4; i <= n; i++)
          if (f[i] != "{" && f[i] != "}") perms = perms (perms == "" ? "" : " ") f[i]
      } else if (kind == "type_transition") {
        dflt = f[4]
      } else {
        next
      }
      if (target in is_attr) {
        m = split(members[target], mm, " ")
        for (i = 1; i <= m; i++) print kind, mm[i], class, perms, cond, dflt, rule
      } else {
        print kind, target, class, perms, cond, dflt, rule
      }
    }' "${work}/attrs" "$1"
}
flatten "${work}/agent.raw" >"${work}/agent"
flatten "${work}/launcher.raw" >"${work}/launcher"

# User home types: members of user_home_content_type and user_home_type, plus user_home_dir_t and
# user_home_t, minus cagent's own types (its run directories live under the home directory).
awk '
  /^   attribute / { keep = ($2 == "user_home_content_type;" || $2 == "user_home_type;"); next }
  /^\t/ && keep { t = $0; gsub(/[\t ]/, "", t); print t }
  END { print "user_home_dir_t"; print "user_home_t" }' "${work}/attrs" |
  grep -v '^cagent_' | sort -u >"${work}/home_types"
[[ $(wc -l <"${work}/home_types") -ge 3 ]] ||
  error "found no user home content types in ${policy}; cannot check home access"

failed=()
passed=()

# report NAME DESCRIPTION VIOLATIONS_FILE: a check passes when the file is empty.
report() {
  local name="$1" description="$2" found="$3"
  if [[ -s "${found}" ]]; then
    failed+=("${name}")
    echo "FAIL ${name}: ${description}"
    sort -u "${found}" | head -n 20 | sed 's/^/    /'
  else
    passed+=("${name}")
    echo "PASS ${name}: ${description}"
  fi
}

# offending FILE AWK_PROGRAM: run the program over FILE (agent or launcher); it prints the
# original rule ($7) of each offending row. The program sees the variables agent (the agent
# domain) and loopback (the condition string of the loopback boolean's true branch).
# Columns: $1 kind, $2 target, $3 class, $4 perms, $5 condition, $6 default, $7 rule.
offending() {
  awk -F'\t' -v agent="${AGENT}" -v loopback="[ ${LOOPBACK_BOOL} ]:True" "$2" "${work}/$1" |
    sort -u
}

# granted FILE TARGET CLASS PERMS...: prints "missing: ..." unless unconditional rules on TARGET
# and CLASS together grant every one of PERMS (FILE is agent or launcher).
granted() {
  local file="$1" target="$2" class="$3"
  shift 3
  local source="${AGENT}"
  [[ "${file}" == launcher ]] && source="${LAUNCHER}"
  awk -F'\t' -v source="${source}" -v target="${target}" -v class="${class}" -v want="$*" '
    $1 == "allow" && $2 == target && $3 == class && $5 == "-" {
      n = split($4, p, " ")
      for (i = 1; i <= n; i++) have[p[i]] = 1
    }
    END {
      n = split(want, w, " ")
      for (i = 1; i <= n; i++) if (!(w[i] in have)) missing = missing " " w[i]
      if (missing != "")
        printf "missing: allow %s %s:%s {%s } (unconditional)\n", source, target, class, missing
    }' "${work}/${file}"
}

# type_rule FILE TARGET CLASS DEFAULT: prints "missing: ..." unless an unconditional
# type_transition on TARGET:CLASS yields DEFAULT.
type_rule() {
  local file="$1" target="$2" class="$3" default="$4"
  awk -F'\t' -v target="${target}" -v class="${class}" -v dflt="${default}" '
    $1 == "type_transition" && $2 == target && $3 == class && $6 == dflt && $5 == "-" { found = 1 }
    END { if (!found) printf "missing: type_transition %s:%s %s (unconditional)\n", target, class, dflt }' \
    "${work}/${file}"
}

# ---------------------------------------------------------------------------------------------
# What the agent must not be able to do.

# Network socket classes: anything but Unix sockets. Peer-labelling permissions (recvfrom,
# recv_msg) that the base policy grants every domain need a socket first and are not counted.
# Under the loopback boolean only tcp, udp and netlink_route (getaddrinfo) sockets are allowed.
offending agent '
  $1 == "allow" && $3 ~ /_socket$/ && $3 !~ /^unix_(stream|dgram)_socket$/ {
    n = split($4, p, " "); counted = 0
    for (i = 1; i <= n; i++) if (p[i] != "recvfrom" && p[i] != "recv_msg") counted = 1
    if (!counted) next
    if ($5 != loopback || $3 !~ /^(tcp|udp|netlink_route)_socket$/) print $7
  }' >"${work}/v_net"
if ! grep -qx "   bool ${LOOPBACK_BOOL} false;" "${work}/bools"; then
  echo "boolean ${LOOPBACK_BOOL} is missing or does not default to false" >>"${work}/v_net"
fi
report agent_network_only_behind_loopback_boolean \
  "no socket class but Unix sockets for ${AGENT}, except tcp/udp/netlink_route under ${LOOPBACK_BOOL} (default false)" \
  "${work}/v_net"

awk -F'\t' 'FNR == NR { home[$1] = 1; next } $1 == "allow" && ($2 in home) { print $7 }' \
  "${work}/home_types" "${work}/agent" >"${work}/v_home"
report agent_no_user_home_access \
  "no permission at all for ${AGENT} on user home types ($(wc -l <"${work}/home_types") types: user_home_t, user_home_dir_t, user_home_content_type ...)" \
  "${work}/v_home"

offending agent '($1 == "allow" && $2 == "cagent_log_t") || $6 == "cagent_log_t" { print $7 }' >"${work}/v_log"
report agent_no_audit_log_access \
  "no permission for ${AGENT} on cagent_log_t, and no rule that labels its files cagent_log_t" \
  "${work}/v_log"

offending agent '
  ($1 == "allow" && $3 == "process" && $4 ~ /(^| )(dyn)?transition( |$)/ && $2 != agent) ||
  ($1 == "type_transition" && $3 == "process" && $6 != agent) { print $7 }' >"${work}/v_trans"
report agent_stays_in_own_domain \
  "no process transition/dyntransition or process type_transition from ${AGENT} to any other domain" \
  "${work}/v_trans"

: >"${work}/v_confined"
if grep -qx "   ${AGENT}" "${work}/permissive"; then
  echo "${AGENT} is a permissive type" >>"${work}/v_confined"
fi
tr -s ', ' '\n' <"${work}/agent_type" | sed 's/;$//' | grep 'unconfined' |
  sed "s/^/${AGENT} has the attribute /" >>"${work}/v_confined"
report agent_confined \
  "${AGENT} is enforced: not a permissive type, no *unconfined* attribute" \
  "${work}/v_confined"

# ---------------------------------------------------------------------------------------------
# What the launcher and the agent must be able to do (the module is useless without it).

{
  granted launcher "${AGENT}" process transition
  # no_new_privs and nosuid mounts are in force when the launcher executes the agent.
  granted launcher "${AGENT}" process2 nnp_transition nosuid_transition
  granted launcher cagent_agent_exec_t file execute read open getattr
  type_rule launcher cagent_agent_exec_t process "${AGENT}"
  granted agent cagent_agent_exec_t file entrypoint
} >"${work}/v_enter"
report launcher_enters_agent_domain \
  "${LAUNCHER} executing cagent_agent_exec_t enters ${AGENT} automatically" \
  "${work}/v_enter"

{
  granted launcher cagent_log_t file create open append getattr
  type_rule launcher cagent_run_t file cagent_log_t
  type_rule launcher xdg_data_t dir cagent_run_t
  granted launcher cagent_run_t dir create add_name remove_name write search
  granted launcher cagent_run_t file create open read write
  granted launcher cagent_workspace_t dir create add_name write search
  type_rule launcher cagent_run_t dir cagent_workspace_t
} >"${work}/v_launcher"
report launcher_writes_audit_log_and_run_dirs \
  "${LAUNCHER} creates and appends to cagent_log_t, manages cagent_run_t and creates workspaces" \
  "${work}/v_launcher"

{
  granted agent "${LAUNCHER}" fd use
  granted agent "${LAUNCHER}" unix_stream_socket read write getattr
} >"${work}/v_socket"
report agent_uses_broker_socket \
  "${AGENT} reads, writes and stats the inherited socketpair end of ${LAUNCHER}" \
  "${work}/v_socket"

{
  for t in cagent_workspace_t cagent_tmpfs_t; do
    granted agent "${t}" dir create open read search add_name remove_name write rmdir
    granted agent "${t}" file create open read write append getattr setattr rename unlink map
  done
  type_rule agent tmpfs_t file cagent_tmpfs_t
} >"${work}/v_workspace"
report agent_works_in_workspace_and_tmpfs \
  "${AGENT} manages files in cagent_workspace_t and its private cagent_tmpfs_t" \
  "${work}/v_workspace"

{
  granted agent "${AGENT}" process fork sigchld signal
  granted agent bin_t file execute execute_no_trans open read map
  granted agent shell_exec_t file execute execute_no_trans
  granted agent lib_t file execute read map
  granted agent etc_t file open read
  granted agent usr_t file open read
  granted agent null_device_t chr_file open read write
} >"${work}/v_tools"
report agent_runs_toolchains_in_own_domain \
  "${AGENT} forks and runs bin/lib/usr toolchains without a transition (execute_no_trans)" \
  "${work}/v_tools"

# The labels that the install paths and the per-user state get (cagent.fc after genhomedircon
# expanded HOME_DIR), including which of the overlapping run-directory patterns wins.
: >"${work}/v_fc"
while read -r path kind expected; do
  mode=0100000 # S_IFREG
  [[ "${kind}" == dir ]] && mode=040000
  answer="$(selabel_lookup -b file -k "${path}" -t "${mode}" -f "${file_contexts}" 2>&1)"
  got="$(sed -n 's/^Default context: [^:]*:[^:]*:\([^:]*\):.*/\1/p' <<<"${answer}")"
  if [[ "${got}" != "${expected}" ]]; then
    echo "${path} (${kind}): expected ${expected}, got ${got:-${answer}}" >>"${work}/v_fc"
  fi
done <<'EOF'
/usr/bin/cagent file cagent_exec_t
/usr/local/bin/cagent file cagent_exec_t
/usr/libexec/cagent/cagent-agent file cagent_agent_exec_t
/usr/local/libexec/cagent/cagent-agent file cagent_agent_exec_t
/usr/share/cagent/profiles dir cagent_config_t
/usr/share/cagent/profiles/backend file cagent_config_t
/usr/local/share/cagent/profiles/base file cagent_config_t
/home/alice/.local/state/cagent dir cagent_run_t
/home/alice/.local/state/cagent/runs/r1 dir cagent_run_t
/home/alice/.local/state/cagent/runs/r1/result.json file cagent_run_t
/home/alice/.local/state/cagent/runs/r1/workspace dir cagent_workspace_t
/home/alice/.local/state/cagent/runs/r1/workspace/src/main.c file cagent_workspace_t
/home/alice/.local/state/cagent/runs/r1/workspace/audit.jsonl file cagent_workspace_t
/home/alice/.local/state/cagent/runs/r1/audit.jsonl file cagent_log_t
/root/.local/state/cagent/runs/r1/workspace/setup.py file cagent_workspace_t
/root/.local/state/cagent/runs/r1/audit.jsonl file cagent_log_t
EOF
report file_contexts_label_cagent_paths \
  "install paths and ~/.local/state/cagent/runs/<id>/{workspace,audit.jsonl} get the cagent types" \
  "${work}/v_fc"

# ---------------------------------------------------------------------------------------------

echo
echo "summary: ${#passed[@]} of $((${#passed[@]} + ${#failed[@]})) checks found no violation"
if [[ ${expect_violations} -eq 0 ]]; then
  [[ ${#failed[@]} -eq 0 ]] && exit 0
  exit 1
fi

# Expected-violation mode: every check must have reported a violation.
if [[ ${#passed[@]} -eq 0 ]]; then
  echo "as expected, every check reported a violation on this policy"
  exit 0
fi
echo "these checks found nothing wrong in a policy built to violate them:" >&2
printf '  %s\n' "${passed[@]}" >&2
echo "either the check cannot fail, or tests/selinux/testdata/permissive_variant*" \
  "no longer provokes it (a sed line that stopped matching selinux/cagent.te or cagent.fc)" >&2
exit 1
