# Tests of moec_support (runtime/Support.cmake).
moec_gtest(moec_support_tests
  ${CMAKE_CURRENT_LIST_DIR}/HalfTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/NpyTest.cpp
)
target_link_libraries(moec_support_tests PRIVATE moec_support)
