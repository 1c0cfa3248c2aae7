# Tests of moec_ptxemu (runtime/ptxemu): hand-written PTX against the PTX ISA's semantics.
moec_gtest(moec_ptxemu_tests ${CMAKE_CURRENT_LIST_DIR}/PtxEmuTest.cpp)
target_link_libraries(moec_ptxemu_tests PRIVATE moec_ptxemu)
