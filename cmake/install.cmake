# Installed: headers, libweft.so, the weft command and its man pages, a CMake package (weft::weft),
# weft.pc, and (python/CMakeLists.txt) the Python package. Each file belongs to one component,
# which is one Debian package (cmake/package.cmake):
#   runtime      libweft.so.0                                  libweft0
#   development  headers, libweft.so, CMake package, weft.pc   libweft-dev
#   tools        bin/weft, share/man/man1/weft*.1              weft
#   python       the Python package weft (+ weft.torch)        python3-weft
include(CMakePackageConfigHelpers)
install(TARGETS weft EXPORT weftTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
          NAMELINK_COMPONENT development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS weft_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
if(WEFT_MAN_DIR)
  install(DIRECTORY ${WEFT_MAN_DIR}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools
    FILES_MATCHING PATTERN "*.1")
endif()
# ps.h is the parameter server's client (libweft_ps, built with gRPC, not part of libweft): it is
# not installed until that library is.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/weft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT development PATTERN "ps.h" EXCLUDE)
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft
  COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/weftConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft COMPONENT development)
# weft.pc finds its prefix relative to itself, so `cmake --install --prefix X` stays relocatable.
file(RELATIVE_PATH WEFT_PC_UP "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
# weft.pc is for C++ (its Cflags say -std=c++20); weft-c.pc for C programs of the C API (the
# include path only: a C compiler warns about -std=c++20).
foreach(pc weft weft-c)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
    COMPONENT development)
endforeach()
