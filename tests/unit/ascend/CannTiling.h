//===- CannTiling.h - test oracle for two CANN host tiling algorithms -----===//
//
// A TEST ORACLE, not product code: a clean re-implementation of the host-side tiling of two Ascend C ops, so that
// moec's own Ascend plans can be checked against what CANN itself would choose. Re-derived (not copied) from the
// public CANN sources:
//   MoeInitRoutingV2Grad (910B "membase" template, keys 1000..1102):
//     yuanfang-chen/ops-transformer moe/moe_init_routing_v2_grad/op_host/moe_init_routing_v2_grad_tiling.cpp @38a98fa0,
//     .../op_host/moe_init_routing_v2_grad_tiling_base.cpp @1c330c8b (hicann/ops-transformer @b122ed2 has the same
//     formulas and checks), kernels .../op_kernel/moe_init_routing_v2_grad_{base,with_dropless,with_activate,
//     with_pos_drop_and_pad_zero}.h (hicann/ops-transformer @b122ed2);
//     UTs: recursion-ascend/ops-transformer .../tests/ut/op_host/test_moe_init_routing_v2_grad_tiling.cpp @a093e954
//     and hicann/ops-transformer same path @5cd9e41.
//   MoeTokenUnpermuteWithRoutingMapGrad (keys 0/1/10/11/101/111):
//     yuanfang-chen/ops-transformer moe/moe_token_unpermute_with_routing_map_grad/op_host/
//     moe_token_unpermute_with_routing_map_grad_tiling.cpp @34666f5e, UT .../tests/ut/op_host/
//     test_moe_token_unpermute_with_routing_map_grad_tiling.cpp @15a59a23, kernels .../op_kernel/
//     moe_token_unpermute_with_routing_map_grad.cpp @65485caa, _base.h and _prob_none_drop_pad_false.h @2406c463,
//     _prob_none_drop_pad_true.h @3b632b4f, _prob_not_none_drop_pad_false.h @288b6b0e,
//     _prob_not_none_drop_pad_true.h @1e50a7a6.
// Every failure the CANN tiling reports as GRAPH_FAILED is thrown here as std::invalid_argument.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moec::cann {

enum class DType { F32, F16, BF16 };
int64_t dtypeBytes(DType);

/// What the TilingParse step caches: GetCoreNumAiv() and GetCoreMemSize(UB). Note the runtime UB figure is 256 B
/// below the ini's ub_size (196608 -> 196352 on 910B; the UT framework's default 262144 -> 261888).
struct CannPlatform {
  int64_t aivNum;
  int64_t ubSize;
};

/// One vector core's share of a launch, counted from the op_kernel code (see the *Work functions).
struct CoreWork {
  int64_t rows = 0;          ///< rows of the op's core split (tokens or permuted rows) this core owns
  int64_t dataCopies = 0;    ///< DataCopy/DataCopyPad calls GM<->UB (an InitOutput zero-fill counts as one)
  int64_t gmBytes = 0;       ///< bytes those calls move
  int64_t scalarGmReads = 0; ///< scalar GM loads (GlobalTensor::GetValue / raw __gm__ reads of indices and probs);
                             ///< added beyond the brief because both kernels read their indices this way
  int64_t passes = 0;        ///< UB passes (rows times H loops)
  int64_t bufferCount = 1;   ///< 2: the kernel's queues are double-buffered
  /// Of dataCopies and gmBytes: Init's zero-fill (InitOutput), which a SyncAll of every core then follows
  /// before Process starts (the A3 kernels with probs), so it overlaps none of Process's copies.
  int64_t initCopies = 0, initBytes = 0;
};

struct InitRoutingV2GradTiling {
  // MoeInitRoutingV2GradTilingData, in serialization order (7 fields, then MoeV2GradComputeTilingData's 15).
  int64_t coreNum = 0, n = 0, e = 0, c = 0, cols = 0, k = 0, activeNum = 0;
  int64_t needCoreNum = 0, perCoreElements = 0, lastCoreElements = 0, elementCopyLoops = 0, elementPerCopyCols = 0,
          elementLastCopyCols = 0, binaryAddBufferNum = 0, tmpBufferNum = 0, exponentOfBinary = 0,
          copyBufferSize = 0, tokensFormer = 0, perCoreTokensLoop = 0, perCoreTailTokensFormer = 0,
          lastCoreTokensLoop = 0, lastCoreTailTokensFormer = 0;
  // Launch parameters set beside the tiling data.
  int64_t tilingKey = 0, blockDim = 0, workspaceBytes = 0;
  /// The 22 fields as the CANN UT harness prints them: each value followed by one space (so a trailing space).
  std::string serialize() const;
};

/// gradExpandedXShape: [BSK, H] (dropless), [A, H] (active) or [E, C, H] (dropPadMode 1); rowIdxLength is
/// expandedRowIdx.dim0. gradXShape is the op's output shape [N, H]: CANN's tiling validates it (two of the published
/// failure cases exist only through it), so the full form takes it explicitly.
InitRoutingV2GradTiling initRoutingV2GradTiling(const CannPlatform &, const std::vector<int64_t> &gradExpandedXShape,
                                                int64_t rowIdxLength, const std::vector<int64_t> &gradXShape,
                                                int64_t topK, int64_t dropPadMode, int64_t activeNum, DType);
/// Same, with gradXShape taken as the consistent {rowIdxLength / topK, H}.
InitRoutingV2GradTiling initRoutingV2GradTiling(const CannPlatform &, const std::vector<int64_t> &gradExpandedXShape,
                                                int64_t rowIdxLength, int64_t topK, int64_t dropPadMode,
                                                int64_t activeNum, DType);

struct UnpermuteWithRoutingMapGradTiling {
  // MoeTokenUnpermuteWithRoutingMapGradTilingData, in serialization order (21 fields).
  int64_t tokensNum = 0, topK = 0, capacity = 0, numExpert = 0, hiddenSize = 0, numOutTokens = 0, formerCoreNum = 0,
          tailCoreNum = 0, tokenNumEachCore = 0, tokenNumTailCore = 0, rowIdMapEachCore = 0, rowIdMapTailCore = 0,
          hiddenSizeAlign = 0, hiddenSizeLoopTimes = 0, hiddenSizeLoopTimesAlign = 0, hiddenSizeTail = 0,
          inputReserveNum = 0, indicesReserveNum = 0, indicesReserveNumAlign = 0, numExpertAlign = 0,
          totalUbSize = 0;
  // Launch parameters (CANN also sets ScheduleMode 1, batch mode, for every key).
  int64_t tilingKey = 0, blockDim = 0, workspaceBytes = 0;
  std::string serialize() const; ///< as InitRoutingV2GradTiling::serialize
};

/// tokensNum = Tk (rows of unpermuted_tokens_grad), numOutTokens = R (out_index / permute_token_id length),
/// numExpert = E (probs.dim1; CANN only reads it when probs are given, so it is ignored otherwise),
/// hidden = H, padded = drop_and_pad. probs is ignored unless hasProbs; it must equal tokens, or be F32 with BF16
/// tokens (the "mix" keys 101/111).
UnpermuteWithRoutingMapGradTiling unpermuteWithRoutingMapGradTiling(const CannPlatform &, int64_t tokensNum,
                                                                    int64_t numOutTokens, int64_t numExpert,
                                                                    int64_t hidden, bool padded, bool hasProbs,
                                                                    DType tokens, DType probs);

/// Per-core work of each of the blockDim cores, counted as the op_kernel code issues it; idle cores get zeros.
std::vector<CoreWork> initRoutingV2GradWork(const InitRoutingV2GradTiling &, DType);
/// Per-core work; note the padded+probs kernel zero-fills all of probs_grad on EVERY core, idle ones included.
std::vector<CoreWork> unpermuteWithRoutingMapGradWork(const UnpermuteWithRoutingMapGradTiling &, DType tokens,
                                                      DType probs, bool padded, bool hasProbs);

} // namespace moec::cann
