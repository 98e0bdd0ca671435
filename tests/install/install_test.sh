#!/usr/bin/env bash
# `cmake --install` of the build tree into a scratch DESTDIR: every file lands where it should,
# and the installed cagent runs — --version, a sandboxed /bin/true, and `cagent run` of the
# fix-add demo, which needs the installed cagent to find its installed cagent-agent
# (PREFIX/libexec/cagent/cagent-agent; session/agent.cc).
#   install_test.sh BUILD_DIR PREFIX SOURCE_DIR
set -euo pipefail
build=$1 prefix=$2 source=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

DESTDIR=$tmp/root cmake --install "$build" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
root=$tmp/root$prefix
sysconf=$(sed -n 's/^CAGENT_APPARMOR_DIR:PATH=//p' "$build/CMakeCache.txt")
for f in bin/cagent libexec/cagent/cagent-agent share/man/man1/cagent.1 \
         share/cagent/profiles/base.cagent share/bash-completion/completions/cagent \
         share/zsh/vendor-completions/_cagent share/fish/vendor_completions.d/cagent.fish \
         share/cagent/examples/fix-add/run-demo.sh share/cagent/examples/fix-add/session.jsonl \
         share/cagent/examples/fix-add/repo/.cagent/fix-add.cagent; do
  [ -f "$root/$f" ] || fail "$prefix/$f is not installed"
done
[ -f "$tmp/root$sysconf/cagent" ] || fail "$sysconf/cagent (the AppArmor profile) is not installed"
grep -q "profile cagent $prefix/bin/cagent " "$tmp/root$sysconf/cagent" ||
  fail "the AppArmor profile does not name $prefix/bin/cagent"
[ -x "$root/bin/cagent" ] && [ -x "$root/libexec/cagent/cagent-agent" ] || fail "not executable"

unset CAGENT_AGENT_BINARY
"$root/bin/cagent" --version | grep -qx "cagent [0-9.]*" || fail "installed cagent --version"
"$root/bin/cagent" exec --workspace "$tmp" -- /bin/true || fail "installed cagent exec -- /bin/true"

# The whole demo with the installed binaries: a run (the agent found beside cagent's install),
# its verification, diff and apply.
if ! command -v git >/dev/null || ! command -v python3 >/dev/null; then
  echo "skipped: the demo run needs git and python3"
  exit 77
fi
TMPDIR=$tmp HOME=$tmp XDG_STATE_HOME=$tmp/state XDG_CACHE_HOME=$tmp/cache \
  sh "$source/examples/fix-add/run-demo.sh" "$root/bin/cagent" > "$tmp/demo.log" 2>&1 ||
  { cat "$tmp/demo.log"; fail "the demo with the installed cagent"; }
grep -q "== done" "$tmp/demo.log" || { cat "$tmp/demo.log"; fail "the demo did not finish"; }
echo "ok: installed under DESTDIR$prefix, and the installed cagent runs the demo"
