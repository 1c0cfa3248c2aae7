# Tests of moec_cache (runtime/cache).
moec_gtest(moec_cache_tests ${CMAKE_CURRENT_LIST_DIR}/DiskCacheTest.cpp)
target_link_libraries(moec_cache_tests PRIVATE moec_cache)
