//===- DefaultSchedule.h - The compiler's choice of the schedule fields a request leaves open -*- C++ -*-===//
#pragma once

#include "moec/contracts/Schedule.h"

#include <cstdint>

namespace moec {

/// Fills every field of `requested` that is 0 with the compiler's choice for an output whose contiguous
/// dim has `inner` elements (0 when unknown at compile time) of `elemBytes` bytes each. `vectorizable`
/// says whether the body allows vector accesses along the contiguous dim at all. `cpuLanes`: the f32
/// lanes of the CPU's widest vector register (hostVectorLanes()), the CPU's vector width when the row
/// allows it.
Schedule chooseSchedule(Schedule requested, TargetKind target, int64_t inner, int64_t elemBytes,
                        bool vectorizable, int64_t cpuLanes = 8);

/// The f32 lanes of this machine's widest vector register that the CPU JIT uses: 16 with AVX-512, 8
/// with AVX, else 4.
int64_t hostVectorLanes();

} // namespace moec
