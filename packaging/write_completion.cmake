# Writes OUTPUT: the completion script `CAGENT completion SHELL` prints. Run by
# packaging/CMakeLists.txt at build time, so the installed scripts match the built binary.
execute_process(COMMAND "${CAGENT}" completion "${SHELL}" OUTPUT_FILE "${OUTPUT}.tmp"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${CAGENT} completion ${SHELL} failed (${rc})")
endif()
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
