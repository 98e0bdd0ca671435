#!/usr/bin/env bash
# The AppArmor profile the package installs parses. AppArmor 4.0 (Ubuntu 24.04) knows the
# `userns` rule and abi 4.0; an older parser (Debian 12's 3.0) knows neither, so there the rest of
# the profile is checked without them and the test reports itself skipped.
#   apparmor_test.sh path/to/generated/apparmor/cagent
set -euo pipefail
profile=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -q '^  userns,$' "$profile" || fail "the profile does not allow userns"
if ! command -v apparmor_parser >/dev/null; then
  echo "skipped: apparmor_parser is not installed (Debian: apt-get install apparmor)"
  exit 77
fi
version=$(apparmor_parser --version | sed -n '1s/.* version \([0-9]*\).*/\1/p')
if [ "${version:-0}" -ge 4 ]; then
  apparmor_parser -Q -K "$profile" || fail "apparmor_parser rejects $profile"
  echo "ok: the profile parses (AppArmor $version)"
  exit 0
fi
sed -e 's|abi <abi/4.0>|abi <abi/3.0>|' -e '/^  userns,$/d' "$profile" > "$tmp/cagent"
apparmor_parser -Q -K "$tmp/cagent" 2>&1 | grep -v '^Cache read/write disabled' || true
apparmor_parser -Q -K "$tmp/cagent" >/dev/null 2>&1 || fail "apparmor_parser rejects the rest of $profile"
echo "skipped: apparmor_parser $(apparmor_parser --version | head -1 | awk '{print $NF}') predates" \
     "the userns rule (AppArmor 4.0); the rest of the profile parses"
exit 77
