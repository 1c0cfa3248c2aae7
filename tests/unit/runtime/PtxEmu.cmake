# Tests of moec_ptxemu (runtime/ptxemu): hand-written PTX against the PTX ISA's semantics. The Alias tests give
# instructions a destination that is also a source, the Bounds tests load and store at allocations' edges:
# cases moec's own PTX does not produce today (issue 57). The Calibration tests check the estimate against
# the fit of bench/emu/calibrate.py.
moec_gtest(moec_ptxemu_tests ${CMAKE_CURRENT_LIST_DIR}/PtxEmuTest.cpp
           ${CMAKE_CURRENT_LIST_DIR}/PtxEmuAliasWarpTest.cpp ${CMAKE_CURRENT_LIST_DIR}/PtxEmuAliasAluTest.cpp
           ${CMAKE_CURRENT_LIST_DIR}/PtxEmuAliasCvtTest.cpp ${CMAKE_CURRENT_LIST_DIR}/PtxEmuBoundsTest.cpp
           ${CMAKE_CURRENT_LIST_DIR}/PtxEmuCalibrationTest.cpp)
target_link_libraries(moec_ptxemu_tests PRIVATE moec_ptxemu nlohmann_json::nlohmann_json)
