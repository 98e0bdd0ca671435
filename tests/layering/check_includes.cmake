# Fails when a source file includes a header of a layer it may not use (the include-level half of
# the layer checks; the link-level half is in CMakeLists.txt next to this file). Run by the build:
#   cmake -DSOURCE_DIR=<top> -DSTAMP=<file> -P check_includes.cmake
# Each rule: a directory (its own files, not its subdirectories), then a regular expression of the
# include paths its files must not name.
set(rules
  "common|#include \"(launcher|policy|agent)/"
  "policy|#include \"(launcher|agent)/"
  "agent|#include \"launcher/"
  "launcher|#include \"launcher/(broker|model|run|batch|cli)/"
  "launcher/model|#include \"launcher/(broker|run|batch|cli)/|#include \"launcher/[a-z_]+\\.h\""
  "launcher/egress|#include \"(policy|agent)/|#include \"launcher/(broker|model|run|batch|cli)/|#include \"launcher/[a-z_]+\\.h\""
  "launcher/mcp|#include \"(policy|agent)/|#include \"launcher/(broker|model|egress|run|batch|cli)/|#include \"launcher/[a-z_]+\\.h\""
  "launcher/broker|#include \"launcher/(mcp|run|batch|cli)/|#include \"launcher/[a-z_]+\\.h\""
  "launcher/run|#include \"launcher/(batch|cli)/"
  "launcher/batch|#include \"launcher/cli/")
set(violations "")
foreach(rule IN LISTS rules)
  string(FIND "${rule}" "|" bar)
  string(SUBSTRING "${rule}" 0 ${bar} dir)
  math(EXPR start "${bar} + 1")
  string(SUBSTRING "${rule}" ${start} -1 pattern)
  file(GLOB files "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.cc")
  foreach(f IN LISTS files)
    file(STRINGS "${f}" hits REGEX "${pattern}")
    foreach(h IN LISTS hits)
      file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
      string(APPEND violations "  ${rel}: ${h}\n")
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "includes against the layering (docs/architecture.md, \"Layers\"):\n"
                      "${violations}")
endif()
file(WRITE "${STAMP}" "ok\n")
