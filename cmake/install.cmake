# SPDX-License-Identifier: Apache-2.0
# install.cmake: what `cmake --install` puts where, and the Debian packages CPack builds from it.
#
#   package          component  files
#   libgpucap        lib        <libdir>/gpucap/libgpucap.so (private directory: preloaded by path),
#                               /etc/gpucap/gpucap.ini (a conffile), gpucap.ini(5)
#   gpucap           cli        <bindir>/gpucap, gpucap(1)                      (needs libgpucap)
#   gpucap-webhook   webhook    <bindir>/gpucap-webhook, gpucap-webhook(1)
#   gpucap-exporter  exporter   <bindir>/gpucap-exporter, gpucap-exporter(1), and gpucap-agent, gpucap-agent(1)
#   libgpucap-dev    dev        gpucap.h, gpucap_version.h, gpucap.pc, the CMake package files
#   *-dbgsym         (CPack)    the debug symbols of each, as .ddeb (the binaries are stripped)
#
# Every package has /usr/share/doc/<package>/copyright and changelog.gz, man pages gzipped. No
# .rpm: an RPM built on Debian would require Debian's sonames (libcurl-gnutls.so.4) and paths
# (/usr/lib/x86_64-linux-gnu); on an RPM distribution build from source (README.md, "Install").
include(CMakePackageConfigHelpers)

# Without the library (-DGPUCAP_LIBRARY=OFF: the servers' images) the packages are the servers' and
# the CLI's only.
if(GPUCAP_LIBRARY)
install(TARGETS gpucap EXPORT gpucapTargets
  LIBRARY DESTINATION ${GPUCAP_INSTALL_PKGLIBDIR} COMPONENT lib NAMELINK_SKIP)
install(FILES ${PROJECT_SOURCE_DIR}/libgpucap/include/gpucap.h ${PROJECT_BINARY_DIR}/include/gpucap_version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT gpucapTargets NAMESPACE gpucap:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpucap COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/gpucapConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpucapConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpucap
  PATH_VARS GPUCAP_INSTALL_PKGLIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpucapConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gpucapConfig.cmake ${PROJECT_BINARY_DIR}/gpucapConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpucap COMPONENT dev)
configure_file(${CMAKE_CURRENT_LIST_DIR}/gpucap.pc.in ${PROJECT_BINARY_DIR}/gpucap.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gpucap.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endif()

# The default settings file goes where the library reads it, /etc/gpucap/gpucap.ini, whatever the
# prefix (<prefix>/etc would be read by nothing). For the prefix /usr (the packages) it is a plain
# install (a conffile). For any other prefix (`cmake --install build`, /usr/local) an existing
# /etc/gpucap/gpucap.ini is kept as the administrator left it, and where /etc cannot be written (an
# install without root) the install says where the file is: a copy always lands in
# <prefix>/share/gpucap/gpucap.ini.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  install(FILES ${PROJECT_SOURCE_DIR}/etc/gpucap.ini DESTINATION /etc/gpucap COMPONENT lib)
else()
  install(FILES ${PROJECT_SOURCE_DIR}/etc/gpucap.ini DESTINATION ${CMAKE_INSTALL_DATADIR}/gpucap COMPONENT lib)
  install(CODE "
    set(ini \"\$ENV{DESTDIR}/etc/gpucap/gpucap.ini\")
    if(EXISTS \"\${ini}\")
      message(STATUS \"Kept: \${ini} (the settings file the library reads)\")
    else()
      execute_process(COMMAND \"${CMAKE_COMMAND}\" -E make_directory \"\$ENV{DESTDIR}/etc/gpucap\" ERROR_QUIET)
      execute_process(COMMAND \"${CMAKE_COMMAND}\" -E copy \"${PROJECT_SOURCE_DIR}/etc/gpucap.ini\" \"\${ini}\"
                      RESULT_VARIABLE copied ERROR_QUIET)
      if(copied STREQUAL \"0\")
        message(STATUS \"Installing: \${ini} (the settings file the library reads)\")
      else()
        message(WARNING \"cannot write \${ini} (\${copied}): the library reads its settings there; copy \"
                \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/gpucap/gpucap.ini to it as root\")
      endif()
    endif()" COMPONENT lib)
endif()

# Man pages: each program writes its own from the table its --help prints (`--help-man`), and
# gpucap-ini-man writes gpucap.ini(5) from the options table; a cross build runs them under
# CMAKE_CROSSCOMPILING_EMULATOR (qemu-user for aarch64). Installed gzipped (-n: reproducible).
set(man_pages)
set(man_programs gpucap-cli:cli)
if(GPUCAP_WEBHOOK)
  list(APPEND man_programs gpucap-webhook:webhook gpucap-exporter:exporter gpucap-agent:exporter)
endif()
function(gpc_man target section name component)
  set(out ${PROJECT_BINARY_DIR}/man/${name}.${section})
  set(args --help-man)
  if(target STREQUAL "gpucap-ini-man")
    set(args)
  endif()
  add_custom_command(OUTPUT ${out} ${out}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
    COMMAND ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:${target}> ${args} > ${out}
    COMMAND gzip -9nf -k ${out}
    DEPENDS ${target} VERBATIM)
  set(man_pages ${man_pages} ${out} ${out}.gz PARENT_SCOPE)
  install(FILES ${out}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${component})
endfunction()
foreach(pair IN LISTS man_programs)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 prog)
  list(GET pair 1 component)
  get_target_property(name ${prog} OUTPUT_NAME)
  if(NOT name)
    set(name ${prog})
  endif()
  gpc_man(${prog} 1 ${name} ${component})
endforeach()
gpc_man(gpucap-ini-man 5 gpucap.ini lib)
add_custom_target(man ALL DEPENDS ${man_pages})

# Per package: /usr/share/doc/<package>/copyright (machine-readable) and changelog.gz (a Debian
# changelog: these are native packages).
set(GPUCAP_PACKAGE_CONTACT "gpucap maintainers <gpucap-maintainers@lists.example.org>" CACHE STRING
    "the Maintainer of the Debian packages: set it to your team's address")
string(TIMESTAMP GPUCAP_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
if(DEFINED ENV{SOURCE_DATE_EPOCH})
  set(GPUCAP_CHANGELOG_DATE "Thu, 01 Jan 2026 00:00:00 +0000")
endif()
set(gpc_packages cli:gpucap)
if(GPUCAP_LIBRARY)
  list(APPEND gpc_packages lib:libgpucap dev:libgpucap-dev)
endif()
if(GPUCAP_WEBHOOK)
  list(APPEND gpc_packages webhook:gpucap-webhook exporter:gpucap-exporter)
endif()
foreach(pair IN LISTS gpc_packages)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 component)
  list(GET pair 1 GPUCAP_DEB_NAME)
  set(dir ${PROJECT_BINARY_DIR}/debian-doc/${GPUCAP_DEB_NAME})
  configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/changelog.in ${dir}/changelog @ONLY)
  add_custom_command(OUTPUT ${dir}/changelog.gz COMMAND gzip -9nf -k ${dir}/changelog DEPENDS ${dir}/changelog VERBATIM)
  list(APPEND gpc_doc_files ${dir}/changelog.gz)
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/debian/copyright ${dir}/changelog.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${GPUCAP_DEB_NAME} COMPONENT ${component})
endforeach()
add_custom_target(package-docs ALL DEPENDS ${gpc_doc_files})

# ---- CPack: one .deb per component ----
set(CPACK_PACKAGE_NAME gpucap)
set(CPACK_PACKAGE_VENDOR "gpucap")
set(CPACK_PACKAGE_CONTACT "${GPUCAP_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_LICENSE Apache-2.0)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The binaries stripped into the packages, their symbols into <package>-dbgsym .ddeb files.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_POST_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/debian/fix-dbgsym.cmake)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
    WORLD_READ WORLD_EXECUTE)
set(CPACK_COMPONENTS_ALL cli)
if(GPUCAP_LIBRARY)
  list(APPEND CPACK_COMPONENTS_ALL lib dev)
endif()
if(GPUCAP_WEBHOOK)
  list(APPEND CPACK_COMPONENTS_ALL webhook exporter)
endif()
# Descriptions: a summary line, then the long text; lines under 80 columns (lintian).
set(CPACK_DEBIAN_LIB_PACKAGE_NAME libgpucap)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/debian/conffiles)
set(CPACK_COMPONENT_LIB_DESCRIPTION "per-container GPU memory cap for CUDA programs (preload library)
libgpucap.so is preloaded into CUDA programs (LD_PRELOAD or /etc/ld.so.preload)
and answers CUDA_ERROR_OUT_OF_MEMORY past a per-device budget, shared by the
processes of a container through a crash-safe ledger. This package holds the
library, in a private directory, and its settings file /etc/gpucap/gpucap.ini.")
set(CPACK_DEBIAN_CLI_PACKAGE_NAME gpucap)
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "libgpucap (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_CLI_DESCRIPTION "command line of gpucap, the GPU memory cap
gpucap runs a command under a GPU memory budget (gpucap run), checks a node or
a pod (doctor), validates settings (check), shows a ledger (status), fills a
pod's gpucap volume (inject) and plots a run's report (plot).")
set(CPACK_DEBIAN_WEBHOOK_PACKAGE_NAME gpucap-webhook)
set(CPACK_DEBIAN_WEBHOOK_PACKAGE_SECTION admin)
set(CPACK_COMPONENT_WEBHOOK_DESCRIPTION "Kubernetes admission webhook that injects gpucap
gpucap-webhook is a mutating admission webhook: it gives every GPU container
of a pod the gpucap library, a locked settings file and a budget the platform
owns. It is usually run from its container image; this package is for hosts
that run it outside a cluster.")
set(CPACK_DEBIAN_EXPORTER_PACKAGE_NAME gpucap-exporter)
set(CPACK_DEBIAN_EXPORTER_PACKAGE_SECTION admin)
set(CPACK_COMPONENT_EXPORTER_DESCRIPTION "Prometheus exporter of the gpucap ledgers of a node
gpucap-exporter serves each gpucap container's budget, use, peak and denials
per GPU, read from the ledgers under the kubelet's pod directory, and the sum
of the budgets on each of the node's cards.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libgpucap-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libgpucap (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_DEV_DESCRIPTION "development files of gpucap, the GPU memory cap
The public header gpucap.h (usage and budget queries of a capped process),
gpucap.pc for pkg-config and the CMake package (find_package(gpucap)).")
include(CPack)
