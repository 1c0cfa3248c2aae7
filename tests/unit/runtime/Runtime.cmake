# Tests of moec_runtime pieces that need no compiler (tensor views, the CPU launch pool).
moec_gtest(moec_runtime_tests ${CMAKE_CURRENT_LIST_DIR}/TensorTest.cpp ${CMAKE_CURRENT_LIST_DIR}/ThreadPoolTest.cpp)
target_link_libraries(moec_runtime_tests PRIVATE moec_runtime)
