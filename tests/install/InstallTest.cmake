# ctest install.consumer: moec as an installed CMake package, used the way the README says.
#
#   cmake -DBUILD=<build dir> -DSOURCE=<source dir> -DSCRATCH=<dir, emptied> -DCXX=<C++ compiler>
#         -DGENERATOR=<CMake generator> [-DCUDA_INCLUDE=<dir of cuda.h>]
#         [-DPYTHON=<python3> -DPYTHONDIR=<the package's dir, relative to the prefix>] -P InstallTest.cmake
#
# 1. `cmake --install BUILD --prefix SCRATCH/prefix`.
# 2. Every installed header compiles against the installed tree alone: no LLVM, MLIR or CUDA header (the
#    package adds no CUDA include directory either). Where CUDA_INCLUDE has a cuda.h, the headers also
#    compile with it included before them and after them, as a project using CUDA itself does.
# 3. The README's CMakeLists.txt (section "Using moec from your project") is tests/install/consumer's; that
#    project, with the README's C++ example (the first C++ block of "The C++ API") as its app.cpp, configures
#    against the prefix (find_package(moec CONFIG)), builds with CXX, and runs on the CPU with an empty
#    kernel cache (MOEC_CACHE_DIR): the example checks its result against a loop over the op's definition.
# 4. tests/install/runtime-consumer (moec::runtime alone) builds, lists a bundle that the installed `moec
#    bundle` wrote, and needs no libLLVM or libMLIR at run time.
# 5. The installed Python module (when PYTHON is given) imports from the prefix and lists the ops.
cmake_minimum_required(VERSION 3.20) # the policies of the project's own
foreach(var BUILD SOURCE SCRATCH CXX GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "InstallTest.cmake: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${SCRATCH})
file(MAKE_DIRECTORY ${SCRATCH}/home)
set(prefix ${SCRATCH}/prefix)
# Nothing below reads or writes the user's cache or configuration.
set(ENV{HOME} ${SCRATCH}/home)
set(ENV{XDG_CACHE_HOME} ${SCRATCH}/home/.cache)
set(ENV{MOEC_CACHE_DIR} ${SCRATCH}/cache)
unset(ENV{MOEC_ALWAYS_COMPILE})
unset(ENV{MOEC_DUMP_DIR})
unset(ENV{CMAKE_PREFIX_PATH})

function(run what)
  cmake_parse_arguments(arg "" "OUTPUT" "COMMAND" ${ARGN})
  string(TIMESTAMP start "%s")
  execute_process(COMMAND ${arg_COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(TIMESTAMP end "%s")
  math(EXPR seconds "${end} - ${start}")
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " command "${arg_COMMAND}")
    message(FATAL_ERROR "${what} failed (${rc}):\n${command}\n${out}")
  endif()
  message(STATUS "${what}: ok (${seconds} s)")
  if(arg_OUTPUT)
    set(${arg_OUTPUT} "${out}" PARENT_SCOPE)
  endif()
endfunction()

# 1. Install.
run("install" COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})

# 2. The installed headers, all in one translation unit, with no include directory but the prefix's.
file(GLOB_RECURSE headers RELATIVE ${prefix}/include ${prefix}/include/moec/*.h)
list(SORT headers)
list(LENGTH headers count)
if(count LESS 30 OR NOT "moec/jit/Runtime.h" IN_LIST headers OR NOT "moec/runtime/Bundle.h" IN_LIST headers)
  message(FATAL_ERROR "the installed headers are not what they should be (${count}): ${headers}")
endif()
set(text "")
foreach(h IN LISTS headers)
  string(APPEND text "#include \"${h}\"\n")
endforeach()
# cuda.h's include guard: set when a header pulled cuda.h in from some default include directory.
file(WRITE ${SCRATCH}/headers.cpp "${text}#ifdef __cuda_cuda_h__\n#error an installed header includes cuda.h\n#endif\n")
run("${count} installed headers compile without LLVM's or CUDA's"
    COMMAND ${CXX} -std=c++20 -fsyntax-only -I${prefix}/include ${SCRATCH}/headers.cpp)
if(DEFINED CUDA_INCLUDE AND EXISTS ${CUDA_INCLUDE}/cuda.h)
  # The package adds no CUDA include directory, so the projects of 3. and 4. build without one too.
  file(GLOB package_files ${prefix}/lib/cmake/moec/*.cmake)
  foreach(f IN LISTS package_files)
    file(READ ${f} package)
    string(FIND "${package}" "${CUDA_INCLUDE}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names the CUDA include directory ${CUDA_INCLUDE}")
    endif()
  endforeach()
  file(WRITE ${SCRATCH}/headers-cuda-before.cpp "#include <cuda.h>\n${text}")
  file(WRITE ${SCRATCH}/headers-cuda-after.cpp "${text}#include <cuda.h>\n")
  foreach(order before after)
    run("the installed headers compile with cuda.h included ${order} them"
        COMMAND ${CXX} -std=c++20 -fsyntax-only -I${prefix}/include -I${CUDA_INCLUDE}
                ${SCRATCH}/headers-cuda-${order}.cpp)
  endforeach()
endif()

# 3. The README's project and example.
file(READ ${SOURCE}/README.md readme)
function(readme_block var section language)
  string(FIND "${readme}" "\n${section}\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md has no section '${section}'")
  endif()
  string(SUBSTRING "${readme}" ${at} -1 rest)
  string(FIND "${rest}" "\n```${language}\n" open)
  if(open EQUAL -1)
    message(FATAL_ERROR "README.md's section '${section}' has no ```${language} block")
  endif()
  string(LENGTH "\n```${language}\n" skip)
  math(EXPR open "${open} + ${skip}")
  string(SUBSTRING "${rest}" ${open} -1 rest)
  string(FIND "${rest}" "\n```\n" close)
  math(EXPR close "${close} + 1")
  string(SUBSTRING "${rest}" 0 ${close} body)
  set(${var} "${body}" PARENT_SCOPE)
endfunction()
readme_block(example "## The C++ API" cpp)
readme_block(project "## Using moec from your project" cmake)
file(READ ${SOURCE}/tests/install/consumer/CMakeLists.txt consumer)
if(NOT project STREQUAL consumer)
  message(FATAL_ERROR "README.md's CMakeLists.txt (\"Using moec from your project\") is not "
                      "tests/install/consumer/CMakeLists.txt:\n${project}")
endif()
file(COPY ${SOURCE}/tests/install/consumer/ DESTINATION ${SCRATCH}/app)
file(WRITE ${SCRATCH}/app/app.cpp "${example}")
run("configure the README's project"
    COMMAND ${CMAKE_COMMAND} -S ${SCRATCH}/app -B ${SCRATCH}/app/build -G ${GENERATOR}
            -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix})
run("build the README's example" COMMAND ${CMAKE_COMMAND} --build ${SCRATCH}/app/build)
run("run the README's example" OUTPUT out COMMAND ${SCRATCH}/app/build/app)
message(STATUS "  ${out}")
if(NOT out MATCHES "grad_x: 1835008 elements, 0 differ from the loop")
  message(FATAL_ERROR "the README's example printed:\n${out}")
endif()
file(GLOB entries ${SCRATCH}/cache/*/meta.json)
if(NOT entries)
  message(FATAL_ERROR "the example left no kernel in its cache, ${SCRATCH}/cache")
endif()

# 4. moec::runtime alone.
run("configure the runtime-only project"
    COMMAND ${CMAKE_COMMAND} -S ${SOURCE}/tests/install/runtime-consumer -B ${SCRATCH}/runtime-app -G ${GENERATOR}
            -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix})
run("build the runtime-only project" COMMAND ${CMAKE_COMMAND} --build ${SCRATCH}/runtime-app)
run("the installed moec writes a bundle"
    COMMAND ${prefix}/bin/moec bundle --ops moe_init_routing_v2_grad --dtypes f32 --shapes H=64,top_k=2
            --arch sm_90 -o ${SCRATCH}/bundle)
run("moec::runtime lists it" OUTPUT out COMMAND ${SCRATCH}/runtime-app/runtime_app ${SCRATCH}/bundle)
if(NOT out MATCHES "moe_init_routing_v2_grad f32 ptx-sm_90: [1-9]")
  message(FATAL_ERROR "runtime_app printed:\n${out}")
endif()
function(llvm_dependencies var exe)
  file(GET_RUNTIME_DEPENDENCIES EXECUTABLES ${exe}
       RESOLVED_DEPENDENCIES_VAR resolved UNRESOLVED_DEPENDENCIES_VAR unresolved)
  set(found ${resolved} ${unresolved})
  list(FILTER found INCLUDE REGEX "lib(LLVM|MLIR)[.-]")
  set(${var} "${found}" PARENT_SCOPE)
endfunction()
llvm_dependencies(runtime_llvm ${SCRATCH}/runtime-app/runtime_app)
llvm_dependencies(jit_llvm ${SCRATCH}/app/build/app)
if(runtime_llvm)
  message(FATAL_ERROR "moec::runtime links LLVM or MLIR: ${runtime_llvm}")
endif()
if(NOT jit_llvm) # else the check above could not see them
  message(FATAL_ERROR "no libLLVM or libMLIR among the JIT example's dependencies")
endif()
message(STATUS "moec::runtime needs no LLVM/MLIR library; moec::jit: ${jit_llvm}")

# 5. The Python module.
if(PYTHON)
  set(ENV{PYTHONPATH} ${prefix}/${PYTHONDIR})
  set(ENV{PYTHONDONTWRITEBYTECODE} 1)
  file(WRITE ${SCRATCH}/import.py "import moec\n"
             "assert moec.__file__.startswith('${prefix}/'), moec.__file__\n"
             "print(sorted(moec.list_ops()))\n")
  run("the installed Python module" OUTPUT out COMMAND ${PYTHON} ${SCRATCH}/import.py)
  if(NOT out MATCHES "moe_init_routing_v2_grad")
    message(FATAL_ERROR "the installed module listed:\n${out}")
  endif()
endif()
