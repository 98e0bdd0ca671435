# Fails when a program maps OpenSSL: the launcher (`cagent`: exec, policy, --version) must link
# none of it, neither libssl/libcrypto as shared libraries (a NEEDED entry) nor their code from the
# archives (CAGENT_STATIC_DEPS: OpenSSL's symbols in the program). Issue 37; run by the build:
#   cmake -DREADELF=<readelf> -DPROGRAM=<file> -DSTAMP=<file> -P no_tls_check.cmake
execute_process(COMMAND ${READELF} --dynamic --wide ${PROGRAM} OUTPUT_VARIABLE dynamic
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf --dynamic ${PROGRAM} failed (${rc})")
endif()
execute_process(COMMAND ${READELF} --syms --wide ${PROGRAM} OUTPUT_VARIABLE symbols
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf --syms ${PROGRAM} failed (${rc})")
endif()
set(found "")
string(REGEX MATCHALL "Shared library: \\[lib(ssl|crypto)\\.so[^]]*\\]" needed "${dynamic}")
foreach(n IN LISTS needed)
  string(APPEND found "  ${n}\n")
endforeach()
# A few of the functions every use of OpenSSL's TLS or digests reaches.
string(REGEX MATCHALL " (SSL_CTX_new|SSL_new|EVP_DigestInit_ex2?|EVP_MD_fetch|OPENSSL_init_ssl|OPENSSL_init_crypto)(@[^ \n]*)?\n"
       syms "${symbols}")
list(REMOVE_DUPLICATES syms)
foreach(s IN LISTS syms)
  string(STRIP "${s}" s)
  string(APPEND found "  symbol ${s}\n")
endforeach()
if(found)
  message(FATAL_ERROR "${PROGRAM} links OpenSSL, which the launcher must not (issue 37; "
                      "launcher/CMakeLists.txt, cli/entry.h):\n${found}")
endif()
file(WRITE "${STAMP}" "ok\n")
