#!/usr/bin/env bash
# `cpack -G DEB` from the build tree: cagent_VERSION_ARCH.deb (and cagent-selinux when the module
# was built) with the right control fields and files; the cagent it holds runs once extracted.
# Nothing is installed on this machine (no dpkg -i): tests/install/system_install_test.sh, run by
# CI on its throwaway machine, installs them for real.
#   deb_test.sh BUILD_DIR PREFIX VERSION
set -euo pipefail
build=$1 prefix=$2 version=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in dpkg-deb dpkg cpack; do
  command -v $tool >/dev/null || { echo "skipped: $tool is not installed (dpkg-dev, cmake)"; exit 77; }
done

cpack --config "$build/CPackConfig.cmake" -B "$tmp/out" > "$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
arch=$(dpkg --print-architecture)
deb=$tmp/out/cagent_${version}_${arch}.deb
[ -f "$deb" ] || { ls "$tmp/out"; fail "no cagent_${version}_${arch}.deb"; }

field() { dpkg-deb -f "$1" "$2"; }
[ "$(field "$deb" Package)" = cagent ] || fail "Package is not cagent"
[ "$(field "$deb" Version)" = "$version" ] || fail "Version is not $version"
[ "$(field "$deb" Architecture)" = "$arch" ] || fail "Architecture is not $arch"
depends=$(field "$deb" Depends)
# Debian's libraries, linked as shared libraries so their security updates reach cagent (issue 37),
# are named by dpkg-shlibdeps; nothing of the build's -dev world is. A static build
# (CAGENT_STATIC_DEPS=ON) depends on libc6 alone.
static=$(sed -n 's/^CAGENT_STATIC_DEPS:BOOL=//p' "$build/CMakeCache.txt")
if [ "$static" = ON ]; then
  expected=(libc6)
else
  expected=(libc6 libssl3 libseccomp2 libcap2 libre2-9 libstdc++6)
fi
for lib in "${expected[@]}"; do
  grep -Eq "(^|, )${lib//+/\\+}( |,|$)" <<<"$depends" || fail "Depends lacks $lib: '$depends'"
done
! grep -Eq 'dev|bubblewrap' <<<"$depends" || fail "Depends names a build dependency: '$depends'"

dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' > "$tmp/files"
sysconf=$(sed -n 's/^CAGENT_APPARMOR_DIR:PATH=//p' "$build/CMakeCache.txt")
for f in "$prefix/bin/cagent" "$prefix/libexec/cagent/cagent-full" \
         "$prefix/libexec/cagent/cagent-agent" \
         "$prefix/share/man/man1/cagent.1" "$prefix/share/cagent/profiles/base.cagent" \
         "$prefix/share/bash-completion/completions/cagent" \
         "$prefix/share/zsh/vendor-completions/_cagent" \
         "$prefix/share/fish/vendor_completions.d/cagent.fish" "$sysconf/cagent" \
         "$prefix/share/cagent/examples/fix-add/run-demo.sh"; do
  grep -qx -- "$f" "$tmp/files" || fail "$f is not in the package"
done
! grep -q selinux "$tmp/files" || fail "the SELinux module is in cagent, not cagent-selinux"

# Maintainer scripts: the AppArmor profile is loaded on configure, a conffile.
dpkg-deb -e "$deb" "$tmp/control"
sh -n "$tmp/control/postinst" && sh -n "$tmp/control/prerm" || fail "maintainer scripts do not parse"
grep -q "apparmor_parser -r" "$tmp/control/postinst" || fail "postinst does not load the profile"
grep -qx "$sysconf/cagent" "$tmp/control/conffiles" || fail "the AppArmor profile is no conffile"

dpkg-deb -x "$deb" "$tmp/x"
"$tmp/x$prefix/bin/cagent" --version | grep -qx "cagent $version" || fail "extracted cagent --version"
# The launcher finds cagent-full in ../libexec/cagent/ of the extracted tree and hands it `log`.
"$tmp/x$prefix/bin/cagent" log --help | grep -q "hash-chained" ||
  fail "the extracted cagent does not reach its cagent-full"

if [ -f "$build/selinux/cagent.pp" ]; then
  se=$tmp/out/cagent-selinux_${version}_all.deb
  [ -f "$se" ] || { ls "$tmp/out"; fail "no cagent-selinux_${version}_all.deb"; }
  [ "$(field "$se" Package)" = cagent-selinux ] || fail "Package is not cagent-selinux"
  grep -q "cagent (= $version)" <<<"$(field "$se" Depends)" || fail "cagent-selinux Depends"
  dpkg-deb -c "$se" | grep -q "share/selinux/packages/cagent/cagent.pp" ||
    fail "cagent.pp is not in cagent-selinux"
  # Its maintainer scripts load the module it ships (the path in the package) and take it out.
  dpkg-deb -e "$se" "$tmp/se-control"
  sh -n "$tmp/se-control/postinst" && sh -n "$tmp/se-control/postrm" ||
    fail "cagent-selinux's maintainer scripts do not parse"
  grep -q "^module='$prefix/share/selinux/packages/cagent/cagent.pp'" "$tmp/se-control/postinst" ||
    fail "cagent-selinux's postinst does not name the module it ships"
  grep -q 'semodule -i "$module"' "$tmp/se-control/postinst" || fail "postinst does not semodule -i"
  grep -q 'semodule -r cagent' "$tmp/se-control/postrm" || fail "postrm does not semodule -r"
fi
echo "ok: $(basename "$deb") (Depends: $depends)"
