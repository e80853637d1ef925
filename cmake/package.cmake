# Debian packages: `cpack -G DEB` in the build folder (or `cpack --config build/CPackConfig.cmake
# -G DEB -B DIR`) makes one package per install component (cmake/install.cmake):
#   libweft0      the shared library
#   libweft-dev   headers, libweft.so, the CMake package and weft.pc  (Depends: libweft0 = version)
#   weft          the weft command and its man pages
#   python3-weft  the Python package weft and weft.torch  (Depends: python3-numpy, python3-torch)
# Dependencies on shared libraries (libfmt, libspdlog, libssl, libtorch, ...) come from
# dpkg-shlibdeps. Packages install under /usr; configure with -DCMAKE_INSTALL_PREFIX=/usr for the
# libraries to go to Debian's multiarch folder (/usr/lib/x86_64-linux-gnu) rather than /usr/lib.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME weft)
set(CPACK_PACKAGE_VENDOR "weft")
set(CPACK_PACKAGE_CONTACT "weft maintainers <maintainers@users.noreply.a-seed-dbba5b38.example>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's description starts with its own summary line (so no CPACK_PACKAGE_DESCRIPTION_SUMMARY,
# which CPack would put first in all of them).
set(summary "collective communication for distributed training on CPUs")
# The DEB generator installs with DESTDIR and this prefix, so install-time code sees /usr: the
# Python package goes where /usr/bin/python3 finds it (python/install_dir.py).
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libweft0 gets a shlibs file, so that packages built against it depend on it through
# dpkg-shlibdeps too. (CPack warns that python3-weft's modules have no soname: they are modules.)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_SECTION libs)

set(CPACK_COMPONENTS_ALL runtime development tools)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libweft${PROJECT_VERSION_MAJOR})
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "${summary} (shared library)
weft runs the collectives and point-to-point messages of a training job over shared memory
inside a host and TCP between hosts.")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libweft-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS "libweft${PROJECT_VERSION_MAJOR} (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_DEVELOPMENT_DESCRIPTION "${summary} (development files)
Headers, the CMake package (find_package(weft), weft::weft) and weft.pc for pkg-config.")
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME weft)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "${summary} (the weft command)
weft run (a local launcher), weft bench (nccl-tests style benchmarks), weft store (a
rendezvous store) and weft diag.")
if(WEFT_BUILD_PYTHON OR WEFT_BUILD_TORCH)
  list(APPEND CPACK_COMPONENTS_ALL python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-weft)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  # The modules are built for one Python version (their file names say which).
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" py ${WEFT_PYTHON_VERSION})
  string(REGEX MATCH "^[0-9]+" py_major ${py})
  string(REGEX MATCH "[0-9]+$" py_minor ${py})
  math(EXPR py_next "${py_minor} + 1")
  set(deps "python3 (>= ${py}), python3 (<< ${py_major}.${py_next}), python3-numpy")
  if(WEFT_BUILD_TORCH)
    string(APPEND deps ", python3-torch")
  endif()
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "${deps}")
  # Byte-compiles the package after installing it and removes the byte code before removing it
  # (as Debian's Python packages do), so nothing is left behind.
  set(CPACK_DEBIAN_PYTHON_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/debian/python3-weft/postinst
    ${PROJECT_SOURCE_DIR}/cmake/debian/python3-weft/prerm)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_CONTROL_STRICT_PERMISSION ON)
  set(CPACK_COMPONENT_PYTHON_DESCRIPTION "${summary} (Python)
The module weft (numpy buffers) and the torch.distributed backend weft (import weft.torch).")
endif()
include(CPack)
