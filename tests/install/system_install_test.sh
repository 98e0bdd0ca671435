#!/usr/bin/env bash
# The packages as a new user meets them: `apt-get install ./cagent_*.deb ./cagent-selinux_*.deb`
# on this machine, then, as a freshly made unprivileged user who has read nothing, the demo from
# the installed copy, a sandboxed shell on a terminal, `cagent doctor`, the man page and the
# completions; then `apt-get remove`/`purge` and a check that nothing is left behind (the SELinux
# module out of the policy store, the AppArmor conffile gone).
#
# This installs packages and adds a user: it changes the machine. CI (.ci/run) runs it on its
# throwaway machine; by hand it refuses unless CAGENT_ALLOW_SYSTEM_INSTALL=1. Not a ctest test.
#   system_install_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: system_install_test.sh BUILD_DIR}
if [ "${CAGENT_ALLOW_SYSTEM_INSTALL:-}" != 1 ]; then
  echo "system_install_test.sh: installs packages and adds a user on this machine;" >&2
  echo "  set CAGENT_ALLOW_SYSTEM_INSTALL=1 to let it (CI does)" >&2
  exit 2
fi
[ "$(id -u)" = 0 ] || { echo "system_install_test.sh: needs root (apt-get, useradd)" >&2; exit 2; }
fail() { echo "FAIL: $*" >&2; exit 1; }
say() { echo "== $*"; }

user=cagent-newuser
out=$(mktemp -d)
cleanup() {
  userdel -r "$user" >/dev/null 2>&1 || true
  rm -rf "$out"
}
trap cleanup EXIT

say "cpack in $build"
cpack --config "$build/CPackConfig.cmake" -B "$out" > "$out/cpack.log" 2>&1 ||
  { cat "$out/cpack.log"; fail "cpack"; }
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
debs=("$out"/cagent_*.deb)
[ -f "${debs[0]}" ] || fail "cpack made no cagent_*.deb"
selinux_deb=$(ls "$out"/cagent-selinux_*.deb 2>/dev/null || true)
[ -n "$selinux_deb" ] && debs+=("$selinux_deb")

say "apt-get install ${debs[*]##*/}"
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${debs[@]}" \
  > "$out/apt.log" 2>&1 || { cat "$out/apt.log"; fail "apt-get install of the packages"; }
dpkg-query -W -f='${Status}\n' cagent | grep -qx 'install ok installed' || fail "cagent not installed"
installed=$(command -v cagent) || fail "cagent is not on PATH after the install"
[ "$installed" = "$prefix/bin/cagent" ] || fail "cagent on PATH is $installed, not $prefix/bin/cagent"
dpkg -L cagent | grep -qx "$prefix/share/man/man1/cagent.1" || fail "the man page is not installed"
conffile=$(dpkg-query -W -f='${Conffiles}\n' cagent | awk 'NF {print $1}')
[ -n "$conffile" ] && [ -f "$conffile" ] || fail "the AppArmor profile (conffile) is missing"
demo=$prefix/share/cagent/examples/fix-add/run-demo.sh
[ -f "$demo" ] || fail "the demo is not installed at $demo"
if [ -n "$selinux_deb" ] && command -v semodule >/dev/null && semodule -l >/dev/null 2>&1; then
  semodule -l | grep -qx cagent || fail "cagent-selinux's postinst did not load the module"
  say "the SELinux module is in the policy store"
fi

say "as a new user ($user): the demo, a sandboxed shell, doctor, completions"
useradd -m -s /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
install -d -m 700 -o "$user" "$home/.ssh" "$home/project"
echo "PRIVATE-KEY-OF-$user" > "$home/.ssh/id_ed25519"
chown "$user" "$home/.ssh/id_ed25519"
as_user() { runuser -u "$user" -- env -i HOME="$home" USER="$user" PATH=/usr/local/bin:/usr/bin:/bin \
  LANG=C.UTF-8 TERM=dumb "$@"; }

as_user cagent --version | grep -qx 'cagent [0-9.]*' || fail "cagent --version as $user"
as_user sh -c "cd '$home' && sh '$demo'" > "$out/demo.log" 2>&1 ||
  { cat "$out/demo.log"; fail "the installed demo as $user"; }
grep -q '^== done' "$out/demo.log" || { cat "$out/demo.log"; fail "the demo did not finish"; }
say "demo: $(grep -c . "$out/demo.log") lines, ends '$(tail -n1 "$out/demo.log")'"

# A shell on a terminal (script(1) gives it a pty), typed into: what the sandbox shows it.
printf '%s\n' 'echo "pid=$$ uid=$(id -u)"' \
  "cat ~/.ssh/id_ed25519 $home/.ssh/id_ed25519 2>/dev/null || echo key-hidden" \
  'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\n" , ; echo' 'exit 7' |
  as_user sh -c "cd '$home/project' && script -qec 'cagent exec -- bash --norc -i' /dev/null" \
  > "$out/shell.log" 2>&1 && status=0 || status=$?
tr -d '\r' < "$out/shell.log" > "$out/shell.txt"
[ "$status" = 7 ] || { cat "$out/shell.txt"; fail "the sandboxed shell's exit status was $status, not 7"; }
grep -q "uid=$(id -u "$user")" "$out/shell.txt" || { cat "$out/shell.txt"; fail "shell: uid"; }
grep -q '^key-hidden' "$out/shell.txt" || { cat "$out/shell.txt"; fail "shell: ~/.ssh key visible"; }
grep -q "PRIVATE-KEY-OF" "$out/shell.txt" && fail "shell: the key was printed"
grep -qx 'lo,' "$out/shell.txt" || { cat "$out/shell.txt"; fail "shell: interfaces other than lo"; }
say "sandboxed shell: $(grep -o 'pid=[0-9]* uid=[0-9]*' "$out/shell.txt" | head -n1), key hidden, lo only"

as_user sh -c "cd '$home/project' && cagent doctor" > "$out/doctor.log" 2>&1 || { cat "$out/doctor.log"; fail "cagent doctor as $user"; }
as_user bash -c "source '$prefix/share/bash-completion/completions/cagent' && complete -p cagent" |
  grep -q cagent || fail "the installed bash completion does not register"

say "apt-get remove, purge"
DEBIAN_FRONTEND=noninteractive apt-get purge -y cagent ${selinux_deb:+cagent-selinux} \
  > "$out/purge.log" 2>&1 || { cat "$out/purge.log"; fail "apt-get purge"; }
[ ! -e "$prefix/bin/cagent" ] || fail "$prefix/bin/cagent is left after the purge"
[ ! -e "$conffile" ] || fail "the AppArmor conffile $conffile is left after the purge"
if [ -n "$selinux_deb" ] && command -v semodule >/dev/null && semodule -l >/dev/null 2>&1; then
  ! semodule -l | grep -qx cagent || fail "cagent-selinux's postrm left the module loaded"
fi
echo "ok: installed, used as a new user, and removed cleanly"
