# Configures and builds the fixture project in tests/layering/inverted: -DWHOLE=ON|OFF,
# -DBINARY=<dir>. Fails when the build fails (the test that expects a failure sets WILL_FAIL).
file(REMOVE_RECURSE "${BINARY}")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${FIXTURE}" -B "${BINARY}" -DWHOLE=${WHOLE}
                RESULT_VARIABLE configured)
if(NOT configured EQUAL 0)
  message(FATAL_ERROR "the fixture did not configure (a broken test, not a layer violation)")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${BINARY}" RESULT_VARIABLE built
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT built EQUAL 0)
  message(FATAL_ERROR "the fixture failed to link (WHOLE=${WHOLE})")
endif()
