# `cmake --install build --prefix P`: moec as a CMake package (README: "Using moec from your project").
#
#   P/include/moec/...            the headers of the libraries below; none includes LLVM's or MLIR's
#   P/lib/libmoec_*.a             the libraries (static), exported as moec::<name>:
#                                   moec::runtime  loading, checking, launching; bundles (no LLVM/MLIR)
#                                   moec::jit      moec::Runtime: compiles on first use (links the compiler,
#                                                  libMLIR.so and libLLVM.so by path)
#                                   and what they link: contracts, dsl, ops, cuda, ptxemu, ascend, cache, tune,
#                                   compiler, cases (header-only)
#   P/lib/cmake/moec/             moecConfig.cmake, moecConfigVersion.cmake, moecTargets*.cmake
#   P/bin/                        moec, moec-opt, moec-bundle-info, moec-gpu-check
#   P/share/moec/ops/             the built-in ops' sources (the libraries embed them; these are to read, and
#                                 to copy into a .moe of one's own)
#   P/lib/moec/python/moec/       the Python module (MOEC_INSTALL_PYTHONDIR), when it is built
#
# Installed programs keep a RUNPATH to the directories of the shared libraries they link (libMLIR.so's).
# Included by the top-level CMakeLists.txt once every target exists (not in MOEC_RUNTIME_ONLY builds).
include(CMakePackageConfigHelpers)

set(MOEC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/moec)
set(MOEC_INSTALL_PYTHONDIR ${CMAKE_INSTALL_LIBDIR}/moec/python CACHE STRING
    "where `cmake --install` puts the Python package moec, relative to the prefix (PYTHONPATH=<prefix>/<this>)")

# The libraries, bottom up, and every library they link: an exported static library needs its
# dependencies exported too.
set(exported moec_contracts moec_dsl moec_ops moec_ptxemu moec_cuda moec_runtime moec_cases moec_ascend
             moec_cache moec_tune moec_compiler moec_jit)
foreach(target IN LISTS exported)
  string(REGEX REPLACE "^moec_" "" name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
endforeach()
install(TARGETS ${exported} EXPORT moecTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT moecTargets NAMESPACE moec:: DESTINATION ${MOEC_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/moecConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/cmake/moecConfig.cmake
                              INSTALL_DESTINATION ${MOEC_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/moecConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/moecConfig.cmake ${CMAKE_BINARY_DIR}/cmake/moecConfigVersion.cmake
        DESTINATION ${MOEC_INSTALL_CMAKEDIR})

# The headers: every library's but the compiler's, whose dialect and pass headers need MLIR's. Of those,
# only the two that moec/jit reaches are installed, and they name no LLVM or MLIR type. ctest
# install.consumer compiles every installed header against the installed tree alone.
install(DIRECTORY ${MOEC_INCLUDE}/moec DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h"
        PATTERN "compiler" EXCLUDE)
install(FILES ${MOEC_INCLUDE}/moec/compiler/Pipeline.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/moec/compiler)
install(FILES ${MOEC_INCLUDE}/moec/compiler/Targets/Targets.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/moec/compiler/Targets)

# The tools.
install(TARGETS moec moec-opt moec-bundle-info moec-gpu-check RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_target_properties(moec moec-opt moec-bundle-info moec-gpu-check PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

# The built-in ops, as sources.
file(GLOB ops ${CMAKE_SOURCE_DIR}/ops/*.moe)
install(FILES ${ops} DESTINATION ${CMAKE_INSTALL_DATADIR}/moec/ops)

# The Python module: the extension and the package's Python files, as build/python/moec holds them.
if(TARGET moec_python)
  set_target_properties(moec_python PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS moec_python LIBRARY DESTINATION ${MOEC_INSTALL_PYTHONDIR}/moec)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/moec/ DESTINATION ${MOEC_INSTALL_PYTHONDIR}/moec
          FILES_MATCHING PATTERN "*.py" PATTERN "*.pyi" PATTERN "py.typed" PATTERN "__pycache__" EXCLUDE)
endif()
