# Tests of moec_cuda (runtime/cuda): a fake driver table, plus the real loader on this machine.
moec_gtest(moec_cuda_tests ${CMAKE_CURRENT_LIST_DIR}/CudaDriverTest.cpp)
target_link_libraries(moec_cuda_tests PRIVATE moec_cuda)
