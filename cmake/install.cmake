# What `cmake --install` lays out and `cpack -G DEB` packs (docs/library.md): bin/gguf-reap, the public
# headers, libgguf_reap (static, or shared with -DBUILD_SHARED_LIBS=ON), the CMake package
# (find_package(gguf_reap CONFIG) → gguf_reap::gguf_reap), gguf_reap.pc, and a man page per command made
# from its --help by help2man.
include(CMakePackageConfigHelpers)
set(GGUF_REAP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gguf_reap)

target_compile_features(gguf_reap PUBLIC cxx_std_20)
install(TARGETS gguf_reap EXPORT gguf_reapTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS gguf-reap RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/gguf_reap DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/gguf_reap/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gguf_reap)

install(EXPORT gguf_reapTargets NAMESPACE gguf_reap:: DESTINATION ${GGUF_REAP_CMAKE_DIR})
configure_package_config_file(cmake/gguf_reapConfig.cmake.in ${PROJECT_BINARY_DIR}/gguf_reapConfig.cmake
  INSTALL_DESTINATION ${GGUF_REAP_CMAKE_DIR})
# 0.x: a minor version may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gguf_reapConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gguf_reapConfig.cmake ${PROJECT_BINARY_DIR}/gguf_reapConfigVersion.cmake
  DESTINATION ${GGUF_REAP_CMAKE_DIR})

# pkg-config: a static library names every library it needs in Libs and Requires, so that plain
# `pkg-config --libs gguf_reap` links; a shared one keeps them private.
if(BUILD_SHARED_LIBS)
  set(GGUF_REAP_PC_REQUIRES "nlohmann_json")
  set(GGUF_REAP_PC_REQUIRES_PRIVATE "spdlog libcurl libcrypto libzip")
  set(GGUF_REAP_PC_LIBS "")
else()
  set(GGUF_REAP_PC_REQUIRES "nlohmann_json spdlog libcurl libcrypto libzip")
  set(GGUF_REAP_PC_REQUIRES_PRIVATE "")
  set(GGUF_REAP_PC_LIBS "-pthread")
endif()
# Relocatable: the prefix is found from the .pc file's own directory (LIBDIR/pkgconfig).
file(RELATIVE_PATH GGUF_REAP_PC_UP "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" GGUF_REAP_PC_UP "${GGUF_REAP_PC_UP}")
configure_file(cmake/gguf_reap.pc.in ${PROJECT_BINARY_DIR}/gguf_reap.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gguf_reap.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Man pages: gguf-reap(1) and gguf-reap-COMMAND(1), from the built binary's --help (help2man, a Debian
# package tools/setup.sh installs). Without help2man there are none, said once here.
set(GGUF_REAP_COMMANDS inspect rank calibrate plan-width splice audit estimate eval card)
find_program(HELP2MAN help2man)
find_program(GZIP gzip)
if(HELP2MAN AND GZIP)
  set(man_dir ${PROJECT_BINARY_DIR}/man)
  set(man_pages "")
  foreach(cmd "" ${GGUF_REAP_COMMANDS})
    if(cmd STREQUAL "")
      set(page gguf-reap)
    else()
      set(page gguf-reap-${cmd})
    endif()
    add_custom_command(OUTPUT ${man_dir}/${page}.1.gz
      COMMAND ${CMAKE_COMMAND} -E make_directory ${man_dir}
      COMMAND ${CMAKE_COMMAND} -DHELP2MAN=${HELP2MAN} -DGZIP=${GZIP} -DBIN=$<TARGET_FILE:gguf-reap>
              -DCOMMAND=${cmd} -DPAGE=${page} -DVERSION=${PROJECT_VERSION} -DOUT=${man_dir}
              -P ${PROJECT_SOURCE_DIR}/cmake/man_page.cmake
      DEPENDS gguf-reap ${PROJECT_SOURCE_DIR}/cmake/man_page.cmake
      COMMENT "man page ${page}(1)" VERBATIM)
    list(APPEND man_pages ${man_dir}/${page}.1.gz)
  endforeach()
  add_custom_target(man ALL DEPENDS ${man_pages})
  # A build of named targets only (tools/setup.sh demo builds gguf-reap and gguf-reap-gen) has made no
  # man pages: the install goes on without them and says so, rather than failing at the end.
  install(CODE "if(NOT EXISTS \"${man_dir}/gguf-reap.1.gz\")
    message(STATUS \"gguf-reap: the man pages were not built (cmake --build ${PROJECT_BINARY_DIR} --target man): installing without them\")
  endif()")
  install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 OPTIONAL)
else()
  message(STATUS "gguf-reap: no help2man or gzip: no man pages (apt-get install help2man)")
endif()

# The Debian package: `cpack -G DEB` in the build directory. Depends come from the shared libraries the
# binary links (dpkg-shlibdeps).
set(CPACK_PACKAGE_NAME gguf-reap)
set(CPACK_PACKAGE_VENDOR "gguf-reap")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION "gguf-reap ranks the routed experts of a Mixture-of-Experts model from
imatrix files, writes a pruned GGUF byte for byte without requantising, audits it against the source,
measures it with llama.cpp and writes its model card. The package holds the command, the C++ library
(libgguf_reap), its headers, its CMake package and pkg-config file.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "gguf-reap developers <gguf-reap@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES bin/gguf-reap)
include(CPack)
