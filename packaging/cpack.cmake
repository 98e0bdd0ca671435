# `cpack -G DEB` (or `cmake --build build --target package`): cagent_VERSION_ARCH.deb with the
# binaries, man page, profiles, completions and AppArmor profile, and, when the SELinux module was
# built, cagent-selinux_VERSION_all.deb with the module (one package per install component).
#
# The package installs under CMAKE_INSTALL_PREFIX, the prefix the binaries were built for (they
# look for the installed profiles there, and the AppArmor profile names the binary's path):
# configure with -DCMAKE_INSTALL_PREFIX=/usr for a package with Debian's layout.

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cagent)
set(CPACK_PACKAGE_VENDOR "cagent")
set(CPACK_PACKAGE_CONTACT "cagent maintainers <cagent@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "setuid-free Linux sandbox for coding agents and commands")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "cagent runs a coding agent, or any command, inside a sandbox built from user, mount, pid "
       "and network namespaces, Landlock and seccomp, described by a profile in a small policy "
       "language.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
# The AppArmor profile's destination is absolute (/etc/apparmor.d): staged through DESTDIR, never
# written to this machine's /etc.
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
# Named, not left to CPack: with one component (no SELinux module built) it would otherwise make a
# monolithic package, which the CPACK_DEBIAN_CAGENT_* settings below do not reach.
set(CPACK_COMPONENTS_ALL cagent)
if(TARGET selinux_module)
  list(APPEND CPACK_COMPONENTS_ALL selinux)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the binaries themselves (dpkg-shlibdeps): libc6, libssl3, libseccomp2, libcap2,
# libre2-9, libstdc++6; with CAGENT_STATIC_DEPS=ON (libraries from their archives) only libc6.
find_program(CAGENT_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(CAGENT_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  set(CPACK_DEBIAN_CAGENT_PACKAGE_DEPENDS "libc6 (>= 2.36)")
endif()

set(CPACK_DEBIAN_CAGENT_PACKAGE_NAME cagent)
# git: `cagent run` pins, captures and applies changes with it; `cagent exec` needs nothing.
set(CPACK_DEBIAN_CAGENT_PACKAGE_RECOMMENDS git)
set(CPACK_DEBIAN_CAGENT_PACKAGE_SUGGESTS "apparmor, cagent-selinux")
set(CPACK_DEBIAN_CAGENT_PACKAGE_CONTROL_EXTRA
    ${CAGENT_DEBIAN_CONTROL_DIR}/postinst ${CAGENT_DEBIAN_CONTROL_DIR}/prerm
    ${CAGENT_DEBIAN_CONTROL_DIR}/conffiles)
set(CPACK_COMPONENT_CAGENT_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}")

# The SELinux module (selinux/, docs/selinux.md): its postinst loads it with semodule -i where
# the machine has a policy store; its postrm takes it out.
set(CPACK_DEBIAN_SELINUX_PACKAGE_NAME cagent-selinux)
set(CPACK_DEBIAN_SELINUX_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_SELINUX_PACKAGE_DEPENDS "cagent (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_SELINUX_PACKAGE_SUGGESTS "policycoreutils, selinux-policy-default")
set(CPACK_DEBIAN_SELINUX_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_SELINUX_PACKAGE_CONTROL_EXTRA
    ${CAGENT_DEBIAN_SELINUX_CONTROL_DIR}/postinst ${CAGENT_DEBIAN_SELINUX_CONTROL_DIR}/postrm)
set(CPACK_COMPONENT_SELINUX_DESCRIPTION
    "SELinux policy module for cagent (loaded into the policy store on install where semodule works)")

include(CPack)
