# moec_support: host-side helpers with no dependencies beyond the C++ standard library
# (16-bit float conversions, .npy files). Included from runtime/CMakeLists.txt.
add_library(moec_support
  ${CMAKE_CURRENT_LIST_DIR}/Half.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Files.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Npy.cpp
)
target_include_directories(moec_support PUBLIC ${MOEC_INCLUDE})
