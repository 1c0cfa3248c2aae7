# Tests of moec_cuda (runtime/cuda): a fake driver table, plus the real loader on this machine; moec's CUDA
# types against the toolkit's cuda.h, where it is installed (the rest of the build never includes cuda.h).
moec_gtest(moec_cuda_tests ${CMAKE_CURRENT_LIST_DIR}/CudaDriverTest.cpp ${CMAKE_CURRENT_LIST_DIR}/CudaTypesTest.cpp)
target_link_libraries(moec_cuda_tests PRIVATE moec_cuda)
if(EXISTS ${MOEC_CUDA_ROOT}/include/cuda.h)
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/CudaTypesTest.cpp APPEND PROPERTY INCLUDE_DIRECTORIES
               ${MOEC_CUDA_ROOT}/include)
endif()
