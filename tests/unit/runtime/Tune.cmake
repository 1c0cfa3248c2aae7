# Tests of moec_tune (runtime/tune).
moec_gtest(moec_tune_tests ${CMAKE_CURRENT_LIST_DIR}/TuningDbTest.cpp ${CMAKE_CURRENT_LIST_DIR}/TuningDbClearTest.cpp)
target_link_libraries(moec_tune_tests PRIVATE moec_tune moec_cache)
