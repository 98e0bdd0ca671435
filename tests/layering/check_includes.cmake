# Fails when a source file includes a header of a layer it may not use (the include-level half of
# the layer checks; the link-level half is in CMakeLists.txt next to this file). Run by the build:
#   cmake -DSOURCE_DIR=<top> -DSTAMP=<file> -P check_includes.cmake
# Each rule: a directory (its own files, not its subdirectories), then a regular expression of the
# include paths its files must not name.
set(rules
  "common|#include \"(launcher|policy|agent)/"
  "policy/match|#include \"(launcher|agent)/|#include \"policy/(language|review)/"
  "policy/language|#include \"(launcher|agent)/|#include \"policy/review/"
  "policy/review|#include \"(launcher|agent)/"
  "agent|#include \"launcher/|#include \"policy/review/"
  "launcher/guard|#include \"(policy|agent)/|#include \"launcher/(sandbox|profile|model|egress|mcp|broker|session|run|batch|cli)/"
  "launcher/sandbox|#include \"(policy|agent)/|#include \"launcher/(profile|model|egress|mcp|broker|session|run|batch|cli)/"
  "launcher/profile|#include \"agent/|#include \"policy/review/|#include \"launcher/(model|egress|mcp|broker|session|run|batch|cli)/"
  "launcher/model|#include \"(policy|agent)/|#include \"launcher/(guard|sandbox|profile|egress|mcp|broker|session|run|batch|cli)/"
  "launcher/egress|#include \"(policy|agent)/|#include \"launcher/(guard|sandbox|profile|model|egress/tls|mcp|broker|session|run|batch|cli)/"
  "launcher/egress/tls|#include \"(policy|agent)/|#include \"launcher/(guard|sandbox|profile|model|mcp|broker|session|run|batch|cli)/"
  "launcher/mcp/protocol|#include \"(policy|agent)/|#include \"launcher/(guard|sandbox|profile|model|egress|mcp/serve|broker|session|run|batch|cli)/"
  "launcher/broker|#include \"agent/|#include \"policy/review/|#include \"launcher/(egress/tls|guard|sandbox|profile|mcp|session|run|batch|cli)/"
  "launcher/session|#include \"agent/|#include \"policy/review/|#include \"launcher/(egress/tls|mcp|run|batch|cli)/"
  "launcher/mcp/serve|#include \"agent/|#include \"policy/review/|#include \"launcher/(egress/tls|run|batch|cli)/"
  "launcher/run|#include \"agent/|#include \"policy/review/|#include \"launcher/(egress/tls|mcp|batch|cli)/"
  "launcher/batch|#include \"agent/|#include \"launcher/cli/|#include \"launcher/egress/tls/"
  "launcher/cli|#include \"agent/")
# Code lives in a layer's folder: a folder that groups layers (launcher/, policy/, launcher/mcp/)
# holds none of its own, so every source file has a rule above.
set(grouping_folders launcher policy launcher/mcp)
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
foreach(dir IN LISTS grouping_folders)
  file(GLOB loose "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.cc")
  foreach(f IN LISTS loose)
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
    string(APPEND violations "  ${rel}: a source file outside a layer's folder\n")
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "includes against the layering (docs/architecture.md, \"Layers\"):\n"
                      "${violations}")
endif()
file(WRITE "${STAMP}" "ok\n")
