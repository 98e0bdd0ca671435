#!/bin/bash
# Builds the binary (kernel) policies that check_policy.sh analyses, without touching the live
# system's SELinux store or loading anything into the kernel.
#
#   build_policy.sh store OUT_DIR
#       Make a private module store under OUT_DIR/root from the distribution's reference policy
#       modules (/usr/share/selinux/$CAGENT_SELINUX_POLICY/*.pp.bz2, Debian's
#       selinux-policy-default), as the package's postinst does for the live store, but with
#       `semodule -p OUT_DIR/root -n`. Works unprivileged: it only reads world-readable package files.
#
#   build_policy.sh link STORE_DIR MODULE.pp OUT_POLICY
#       Copy STORE_DIR/root, `semodule -i MODULE.pp` into the copy, and write the resulting kernel
#       policy (policy.NN) to OUT_POLICY and its file contexts to OUT_POLICY.file_contexts and
#       OUT_POLICY.file_contexts.homedirs. This is what `semodule -i` does on a real system, run
#       against a throw-away copy of the store.
#
#   build_policy.sh variant SRC SED_SCRIPT OUT [EXTRA]
#       Write a test variant of a module source: SRC edited by SED_SCRIPT, then EXTRA appended.
#
# Exit status: 0 on success, 1 on failure, 2 on a usage error.

set -euo pipefail

PATH="${PATH}:/usr/sbin:/sbin" # semodule, for unprivileged users

readonly POLICY_NAME="${CAGENT_SELINUX_POLICY:-default}"
readonly POLICY_SRC="/usr/share/selinux/${POLICY_NAME}"

die() {
  echo "build_policy.sh: $*" >&2
  exit 1
}

# libsemanage warns about users named in the policy that this machine's /etc/passwd lacks
# ("user sddm not in password file"); that is noise here.
run_semodule() {
  local log
  log="$(mktemp)"
  if ! semodule "$@" >"${log}" 2>&1; then
    cat "${log}" >&2
    rm -f "${log}"
    return 1
  fi
  grep -v 'not in password file' "${log}" >&2 || true
  rm -f "${log}"
}

cmd_store() {
  local out="$1"
  [[ -r "${POLICY_SRC}/.modules" && -r "${POLICY_SRC}/base.pp.bz2" ]] ||
    die "no reference policy modules in ${POLICY_SRC}; install the selinux-policy-${POLICY_NAME} package"
  local root="${out}/root"
  rm -rf "${out}"
  mkdir -p "${root}/etc/selinux" "${root}/var/lib/selinux"
  printf 'SELINUX=disabled\nSELINUXTYPE=%s\n' "${POLICY_NAME}" >"${root}/etc/selinux/config"
  # libsemanage reads <root>/etc/selinux/semanage.conf when present, else the host's.
  if [[ -r /etc/selinux/semanage.conf ]]; then
    cp /etc/selinux/semanage.conf "${root}/etc/selinux/semanage.conf"
  fi

  # Every module the package ships (base included), all enabled: a superset of what the package's
  # postinst enables, so the negative checks see at least every rule a real system could have.
  local -a modules args=()
  mapfile -t modules <"${POLICY_SRC}/.modules"
  local module
  for module in "${modules[@]}"; do
    [[ -n "${module// /}" ]] || continue
    args+=("-i" "${POLICY_SRC}/${module}.pp.bz2")
  done
  run_semodule -p "${root}" -s "${POLICY_NAME}" -X 100 -n "${args[@]}" ||
    die "semodule could not build the private store in ${root}"
  touch "${out}/stamp"
}

cmd_link() {
  local store="$1" module="$2" out="$3"
  [[ -d "${store}/root/var/lib/selinux/${POLICY_NAME}" ]] ||
    die "${store} holds no module store; run: build_policy.sh store ${store}"
  [[ -r "${module}" ]] || die "cannot read module package ${module}"
  local work
  work="$(mktemp -d "$(dirname "${out}")/.link.XXXXXX")"
  # shellcheck disable=SC2064  # expand now: the trap must remove this run's directory.
  trap "rm -rf '${work}'" EXIT
  cp -a "${store}/root" "${work}/root"
  run_semodule -p "${work}/root" -s "${POLICY_NAME}" -n -i "${module}" ||
    die "semodule could not link ${module} against the ${POLICY_NAME} policy"
  local -a built=("${work}/root/etc/selinux/${POLICY_NAME}/policy/policy."*)
  [[ ${#built[@]} -eq 1 && -f "${built[0]}" ]] || die "semodule wrote no kernel policy"
  local contexts="${work}/root/etc/selinux/${POLICY_NAME}/contexts/files"
  cp "${contexts}/file_contexts" "${out}.file_contexts"
  cp "${contexts}/file_contexts.homedirs" "${out}.file_contexts.homedirs"
  cp "${built[0]}" "${out}.tmp"
  mv "${out}.tmp" "${out}"
}

cmd_variant() {
  local src="$1" script="$2" out="$3" extra="${4:-}"
  {
    sed -f "${script}" "${src}"
    if [[ -n "${extra}" ]]; then
      echo
      cat "${extra}"
    fi
  } >"${out}.tmp"
  mv "${out}.tmp" "${out}"
}

case "${1:-}" in
  store) [[ $# -eq 2 ]] || exit 2; cmd_store "$2" ;;
  link) [[ $# -eq 4 ]] || exit 2; cmd_link "$2" "$3" "$4" ;;
  variant) [[ $# -eq 4 || $# -eq 5 ]] || exit 2; cmd_variant "$2" "$3" "$4" "${5:-}" ;;
  *)
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
    exit 2
    ;;
esac
