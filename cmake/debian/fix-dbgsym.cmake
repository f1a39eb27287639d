# SPDX-License-Identifier: Apache-2.0
# CPACK_POST_BUILD_SCRIPTS: cmake/debian/fix-dbgsym.sh over the -dbgsym packages just made.
set(ddebs)
foreach(f IN LISTS CPACK_PACKAGE_FILES)
  if(f MATCHES "\\.ddeb$")
    list(APPEND ddebs ${f})
  endif()
endforeach()
if(ddebs)
  execute_process(COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/fix-dbgsym.sh ${ddebs} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fix-dbgsym.sh failed: ${rc}")
  endif()
endif()
