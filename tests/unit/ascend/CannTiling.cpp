//===- CannTiling.cpp - test oracle for two CANN host tiling algorithms ---===//
//
// See CannTiling.h for the sources. Comments name the CANN function each step mirrors. Checks marked "oracle guard"
// are not in CANN (where the input would divide by zero or be meaningless); everything else is CANN's own order.
//===----------------------------------------------------------------------===//
#include "CannTiling.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace moec::cann {
namespace {

constexpr int64_t kSystemWorkspace = 16 * 1024 * 1024; // both ops: the fixed 16 MiB system workspace

[[noreturn]] void fail(const std::string &op, const std::string &why) { throw std::invalid_argument(op + ": " + why); }

// The zero-safe helpers CANN uses (a zero divisor yields 0).
int64_t ceilDiv(int64_t a, int64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }
int64_t div0(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }
int64_t rem0(int64_t a, int64_t b) { return b == 0 ? 0 : a % b; }
int64_t alignUp(int64_t a, int64_t b) { return b == 0 ? 0 : (a + b - 1) / b * b; }
int64_t alignDown(int64_t a, int64_t b) { return b == 0 ? 0 : a / b * b; }

template <size_t N> std::string join(const int64_t (&v)[N]) {
  std::string s;
  for (int64_t x : v)
    s += std::to_string(x) + ' ';
  return s;
}

void checkPlatform(const char *op, const CannPlatform &p) {
  // MoeInitRoutingV2Grad's TilingParse rejects these; for the unpermute grad it is an oracle guard.
  if (p.aivNum <= 0)
    fail(op, "platform aivNum must be positive, got " + std::to_string(p.aivNum));
  if (p.ubSize <= 0)
    fail(op, "platform ubSize must be positive, got " + std::to_string(p.ubSize));
}

} // namespace

int64_t dtypeBytes(DType t) { return t == DType::F32 ? 4 : 2; }

std::string InitRoutingV2GradTiling::serialize() const {
  const int64_t v[] = {coreNum, n, e, c, cols, k, activeNum,
                       needCoreNum, perCoreElements, lastCoreElements, elementCopyLoops, elementPerCopyCols,
                       elementLastCopyCols, binaryAddBufferNum, tmpBufferNum, exponentOfBinary, copyBufferSize,
                       tokensFormer, perCoreTokensLoop, perCoreTailTokensFormer, lastCoreTokensLoop,
                       lastCoreTailTokensFormer};
  return join(v);
}

std::string UnpermuteWithRoutingMapGradTiling::serialize() const {
  const int64_t v[] = {tokensNum, topK, capacity, numExpert, hiddenSize, numOutTokens, formerCoreNum, tailCoreNum,
                       tokenNumEachCore, tokenNumTailCore, rowIdMapEachCore, rowIdMapTailCore, hiddenSizeAlign,
                       hiddenSizeLoopTimes, hiddenSizeLoopTimesAlign, hiddenSizeTail, inputReserveNum,
                       indicesReserveNum, indicesReserveNumAlign, numExpertAlign, totalUbSize};
  return join(v);
}

//===----------------------------------------------------------------------===//
// MoeInitRoutingV2Grad
//===----------------------------------------------------------------------===//

InitRoutingV2GradTiling initRoutingV2GradTiling(const CannPlatform &p, const std::vector<int64_t> &x,
                                                int64_t rowIdxLength, const std::vector<int64_t> &gradX, int64_t topK,
                                                int64_t dropPadMode, int64_t activeNum, DType dtype) {
  const char *op = "MoeInitRoutingV2Grad";
  checkPlatform(op, p);

  // CheckParamsValidity (dtype checks are moot: DType only holds the three supported types, expandedRowIdx is int32).
  if (dropPadMode != 0 && dropPadMode != 1)
    fail(op, "drop_pad_mode must be 0 or 1, got " + std::to_string(dropPadMode));
  if (topK <= 0)
    fail(op, "top_k must be positive, got " + std::to_string(topK));
  if (activeNum < 0)
    fail(op, "active_num must be >= 0, got " + std::to_string(activeNum));
  if (x.size() != 2 && x.size() != 3)
    fail(op, "grad_expanded_x must be 2-D or 3-D, got " + std::to_string(x.size()) + "-D");
  if (dropPadMode == 1 && x.size() != 3)
    fail(op, "grad_expanded_x must be 3-D [E, C, H] in drop/pad mode");
  if (dropPadMode == 0 && activeNum == 0 && x[0] != rowIdxLength)
    fail(op, "dropless: grad_expanded_x.dim0 (" + std::to_string(x[0]) + ") != expanded_row_idx.dim0 (" +
                 std::to_string(rowIdxLength) + ")");
  if (dropPadMode == 0 && activeNum > 0 && x[0] != activeNum)
    fail(op, "active: grad_expanded_x.dim0 (" + std::to_string(x[0]) + ") != active_num (" +
                 std::to_string(activeNum) + ")");
  if (gradX.size() != 2)
    fail(op, "grad_x must be 2-D, got " + std::to_string(gradX.size()) + "-D");
  // CANN takes H from dim 1 whenever dropPadMode is 0, even for a 3-D input.
  const int64_t h = dropPadMode == 0 ? x[1] : x[2];
  if (gradX[1] != h)
    fail(op, "grad_x.dim1 (" + std::to_string(gradX[1]) + ") != hidden size (" + std::to_string(h) + ")");
  if (gradX[0] != rowIdxLength / topK)
    fail(op, "grad_x.dim0 (" + std::to_string(gradX[0]) + ") != expanded_row_idx.dim0 / top_k (" +
                 std::to_string(rowIdxLength / topK) + ")");

  // CheckShapeValidity: rowIdx and gradX strictly positive; x too in plain dropless, else only non-negative.
  if (rowIdxLength <= 0 || gradX[0] <= 0 || gradX[1] <= 0)
    fail(op, "expanded_row_idx and grad_x dims must be positive");
  for (int64_t d : x)
    if (d < 0 || (d == 0 && dropPadMode == 0 && activeNum == 0))
      fail(op, "grad_expanded_x has an invalid dim " + std::to_string(d));

  // GetShapeAttrsInfo
  if (rowIdxLength % topK != 0)
    fail(op, "expanded_row_idx.dim0 (" + std::to_string(rowIdxLength) + ") is not a multiple of top_k (" +
                 std::to_string(topK) + ")");

  InitRoutingV2GradTiling t;
  t.coreNum = p.aivNum;
  t.n = rowIdxLength / topK;
  t.e = dropPadMode == 0 ? 0 : x[0];
  t.c = dropPadMode == 0 ? 0 : x[1];
  t.cols = h;
  t.k = topK;
  t.activeNum = activeNum;

  // TilingSplitCore: whole tokens per core.
  t.perCoreElements = ceilDiv(t.n, p.aivNum);
  t.needCoreNum = ceilDiv(t.n, t.perCoreElements);
  t.lastCoreElements = t.n - (t.needCoreNum - 1) * t.perCoreElements;

  // TilingGradCompute: binary-tree add buffers ~ K/2 (K rows are read at stride 2 into them), plus temp buffers.
  const bool bigK = topK >= 128;
  const int64_t floorLog2K = std::bit_width(static_cast<uint64_t>(topK)) - 1;
  t.exponentOfBinary = bigK ? 6 : std::max<int64_t>(0, floorLog2K - 1);
  t.binaryAddBufferNum = bigK ? 64 : int64_t{1} << t.exponentOfBinary;
  t.tmpBufferNum = bigK ? t.binaryAddBufferNum : 1;
  const int64_t buffers = t.binaryAddBufferNum + t.tmpBufferNum;

  // One buffer holds a row chunk as fp32; fp16/bf16 need twice their bytes (loaded into the back half, cast in place).
  const int64_t coe = dtype == DType::F32 ? 1 : 2;
  const int64_t alignedRowBytes = alignUp(h * dtypeBytes(dtype), 32) * coe;
  const int64_t maxCopyBytes = std::min<int64_t>(alignedRowBytes, 65536); // MAX_DATACOPY_SIZE
  const int64_t ubShare = p.ubSize / buffers / coe / 32 * 32 * coe;
  t.copyBufferSize = std::min(maxCopyBytes, ubShare);
  if (t.copyBufferSize <= 0) // oracle guard: CANN would divide by zero below
    fail(op, "ubSize " + std::to_string(p.ubSize) + " leaves no room for " + std::to_string(buffers) + " buffers");
  t.elementPerCopyCols = t.copyBufferSize / 4;
  t.elementCopyLoops = ceilDiv(h, t.elementPerCopyCols);
  t.elementLastCopyCols = h % t.elementPerCopyCols == 0 ? t.elementPerCopyCols : h % t.elementPerCopyCols;

  // Tokens whose buffers fit in UB at once (one zero-fill pass per group), at least 1, at most a core's share.
  t.tokensFormer = std::min(p.ubSize / (t.copyBufferSize * buffers), t.perCoreElements);
  if (t.tokensFormer <= 0)
    t.tokensFormer = 1;
  auto tail = [&](int64_t elems) { return elems % t.tokensFormer == 0 ? t.tokensFormer : elems % t.tokensFormer; };
  t.perCoreTokensLoop = ceilDiv(t.perCoreElements, t.tokensFormer);
  t.perCoreTailTokensFormer = tail(t.perCoreElements);
  t.lastCoreTokensLoop = ceilDiv(t.lastCoreElements, t.tokensFormer);
  t.lastCoreTailTokensFormer = tail(t.lastCoreElements);

  // GetTilingKey / PostTiling / GetWorkspaceSize
  t.tilingKey = 1000 + (dropPadMode == 1 ? 100 : activeNum > 0 ? 10 : 0) +
                (dtype == DType::F16 ? 1 : dtype == DType::BF16 ? 2 : 0);
  t.blockDim = p.aivNum; // all AIV cores; blockIdx >= needCoreNum returns at once
  t.workspaceBytes = kSystemWorkspace;
  return t;
}

InitRoutingV2GradTiling initRoutingV2GradTiling(const CannPlatform &p, const std::vector<int64_t> &x,
                                                int64_t rowIdxLength, int64_t topK, int64_t dropPadMode,
                                                int64_t activeNum, DType dtype) {
  // Any malformed input is rejected by the full form before it looks at these numbers.
  const int64_t h = x.size() >= 2 ? (dropPadMode == 1 && x.size() == 3 ? x[2] : x[1]) : 0;
  return initRoutingV2GradTiling(p, x, rowIdxLength, {topK > 0 ? rowIdxLength / topK : 0, h}, topK, dropPadMode,
                                 activeNum, dtype);
}

// Counted from op_kernel/moe_init_routing_v2_grad_with_{dropless,activate,pos_drop_and_pad_zero}.h (all three issue
// the same pattern). A core owns perCoreElements (last used core: lastCoreElements) whole output tokens. For each
// token and each of elementCopyLoops H chunks, GradProcess reads the K expandedRowIdx entries with scalar __gm__
// loads (S1/S2 take the even offsets, S3 the odd ones), issues one DataCopyPad GM->UB per routed row (K), tree-adds
// them in UB, and one DataCopyPad UB->GM for the chunk. So per token: loops*(K+1) copies, (K+1)*H*dtype bytes,
// loops*K scalar loads. tokensFormer only groups tokens per UB pass (one Duplicate zero-fill per group); it does not
// merge any copies. Simplification: every index is live. The kernel skips the copy of a row >= active_num (keys 101x)
// or of a -1 slot (keys 110x), and only A resp. E*C rows exist, so in those modes these counts are an upper bound (at
// least N*K - A resp. N*K - E*C of the K*N gathers do not happen; which tokens lose them depends on the routing).
std::vector<CoreWork> initRoutingV2GradWork(const InitRoutingV2GradTiling &t, DType dtype) {
  if (t.tilingKey % 10 != (dtype == DType::F16 ? 1 : dtype == DType::BF16 ? 2 : 0))
    fail("MoeInitRoutingV2Grad", "dtype does not match tiling key " + std::to_string(t.tilingKey));
  std::vector<CoreWork> work(static_cast<size_t>(std::max<int64_t>(t.blockDim, 0)));
  for (int64_t core = 0; core < t.blockDim && core < t.needCoreNum; ++core) {
    CoreWork &w = work[static_cast<size_t>(core)];
    w.rows = core == t.needCoreNum - 1 ? t.lastCoreElements : t.perCoreElements;
    w.dataCopies = w.rows * t.elementCopyLoops * (t.k + 1);
    w.gmBytes = w.rows * (t.k + 1) * t.cols * dtypeBytes(dtype);
    w.scalarGmReads = w.rows * t.elementCopyLoops * t.k;
  }
  return work;
}

//===----------------------------------------------------------------------===//
// MoeTokenUnpermuteWithRoutingMapGrad
//===----------------------------------------------------------------------===//

UnpermuteWithRoutingMapGradTiling unpermuteWithRoutingMapGradTiling(const CannPlatform &p, int64_t tokensNum,
                                                                    int64_t numOutTokens, int64_t numExpert,
                                                                    int64_t hidden, bool padded, bool hasProbs,
                                                                    DType tokens, DType probs) {
  const char *op = "MoeTokenUnpermuteWithRoutingMapGrad";
  checkPlatform(op, p);
  if (tokensNum < 0 || numOutTokens < 0 || numExpert < 0 || hidden < 0) // oracle guard: shapes are never negative
    fail(op, "negative dimension");

  // Tiling4MoeTokenUnpermuteWithRoutingMapGrad: probs dtype first.
  const DType probDtype = hasProbs ? probs : tokens;
  if (probDtype != tokens && !(tokens == DType::BF16 && probDtype == DType::F32))
    fail(op, "probs dtype must equal the tokens dtype, or be float32 with bfloat16 tokens");

  UnpermuteWithRoutingMapGradTiling t;
  t.tokensNum = tokensNum;
  t.hiddenSize = hidden;
  t.numOutTokens = numOutTokens;
  t.totalUbSize = p.ubSize;
  const int64_t cores = p.aivNum;
  const int64_t ts = dtypeBytes(tokens);
  const int64_t blockElems = 32 / ts;
  const int64_t ub = p.ubSize;

  // Former/tail split of W rows: the first W % cores cores take one more.
  auto splitRows = [&](int64_t w) {
    t.rowIdMapTailCore = div0(w, cores);
    t.formerCoreNum = rem0(w, cores);
    t.rowIdMapEachCore = t.formerCoreNum == 0 ? t.rowIdMapTailCore : t.rowIdMapTailCore + 1;
    t.tailCoreNum = cores - t.formerCoreNum;
  };
  // Split H into chunks of hiddenSizeAlign (already capped by the caller).
  auto splitHidden = [&] {
    t.hiddenSizeLoopTimes = ceilDiv(hidden, t.hiddenSizeAlign);
    t.hiddenSizeTail = hidden - (t.hiddenSizeLoopTimes - 1) * t.hiddenSizeAlign;
  };

  if (!hasProbs) { // TilingForProbIsNone: a row copy through a double-buffered queue
    splitRows(numOutTokens);
    if (!padded)
      t.topK = div0(numOutTokens, tokensNum);
    t.hiddenSizeAlign = alignUp(hidden, blockElems);
    const int64_t maxH = ub / (2 * ts);
    if (maxH < t.hiddenSizeAlign)
      t.hiddenSizeAlign = alignDown(maxH, blockElems);
    splitHidden();
    t.inputReserveNum = 1;
    t.indicesReserveNum = 1;
  } else if (padded) { // TilingForProbNotNonePadTrue: split over the E*C permuted rows
    t.numExpert = numExpert;
    splitRows(numOutTokens);
    t.capacity = div0(numOutTokens, numExpert);
    if (t.capacity > tokensNum)
      fail(op, "capacity (" + std::to_string(t.capacity) + ") exceeds tokens_num (" + std::to_string(tokensNum) + ")");
    t.hiddenSizeAlign = alignUp(hidden, blockElems);
    // 32 B + 512 fp32 per-chunk partial sums reserved; per H element: double-buffered (8 B fp32 + input dtype).
    const int64_t oneLoopMax = (ub - 32 - 512 * 4) / (2 * (8 + ts));
    if (hidden > oneLoopMax * 512)
      fail(op, "hidden_size " + std::to_string(hidden) + " exceeds the maximum " + std::to_string(oneLoopMax * 512));
    if (oneLoopMax < t.hiddenSizeAlign)
      t.hiddenSizeAlign = alignDown(oneLoopMax, blockElems);
    splitHidden();
    t.hiddenSizeLoopTimesAlign = alignUp(t.hiddenSizeLoopTimes, 8);
    t.inputReserveNum = 1;
    t.indicesReserveNum = 1;
  } else { // TilingForProbNotNonePadFalse: split over tokens, each with its topK permuted rows
    t.numExpert = numExpert;
    if (tokensNum == 0)
      fail(op, "tokens_num must be positive when probs are given without drop_and_pad");
    t.topK = numOutTokens / tokensNum;
    if (t.topK > 512)
      fail(op, "topK (" + std::to_string(t.topK) + ") exceeds 512");
    if (t.topK > numExpert)
      fail(op, "topK (" + std::to_string(t.topK) + ") exceeds experts_num (" + std::to_string(numExpert) + ")");
    t.tokenNumTailCore = div0(tokensNum, cores);
    t.formerCoreNum = rem0(tokensNum, cores);
    t.tokenNumEachCore = t.formerCoreNum == 0 ? t.tokenNumTailCore : t.tokenNumTailCore + 1;
    t.tailCoreNum = cores - t.formerCoreNum;
    t.rowIdMapEachCore = t.tokenNumEachCore * t.topK;
    t.rowIdMapTailCore = t.tokenNumTailCore * t.topK;
    t.hiddenSizeAlign = alignUp(hidden, blockElems);
    t.indicesReserveNum = t.topK <= 256 ? std::min(t.rowIdMapEachCore, alignDown(256, t.topK)) : t.topK;
    t.indicesReserveNumAlign = alignUp(t.indicesReserveNum, blockElems); // aligned in tokens-dtype elements
    t.numExpertAlign = alignUp(numExpert, 32);
    const int64_t pts = dtypeBytes(probDtype);
    // Reserve 256 indices (input dtype) + 2x256 fp32; per expert an int8 routing-map byte + a probs element;
    // per H element 3 double-buffered IO rows + 3 fp32 temporaries.
    const int64_t remain = ub - ts * 256 - 256 * 4 * 2;
    const int64_t expertBytes = (1 + pts) * t.numExpertAlign;
    const int64_t perH = 3 * 2 * ts + 3 * 4;
    const int64_t numExpertMax = (remain - perH) / (1 + pts);
    if (numExpert > numExpertMax)
      fail(op, "experts_num " + std::to_string(numExpert) + " exceeds the maximum " + std::to_string(numExpertMax));
    const int64_t maxH = (remain - expertBytes) / perH;
    if (maxH < t.hiddenSizeAlign)
      t.hiddenSizeAlign = alignDown(maxH, blockElems);
    splitHidden();
  }

  const int64_t mix = probDtype != tokens ? 1 : 0;
  t.tilingKey = mix * 100 + (padded ? 10 : 0) + (hasProbs ? 1 : 0);
  t.blockDim = p.aivNum;                // SetBlockDim(GetCoreNumAiv()): always every core
  t.workspaceBytes = kSystemWorkspace; // GetLibApiWorkSpaceSize()
  return t;
}

// Counted from the four op_kernel/moe_token_unpermute_with_routing_map_grad_prob_*.h kernels. A core owns the rows
// of its former/tail share; per row, L = hiddenSizeLoopTimes chunks whose sizes add up to H:
//  - no probs (keys 0/10): row = one permuted row. Scalar loads: out_index (+ permute_token_id when padded). Per
//    chunk one DataCopyPad in (unpermuted_tokens_grad) and one out (permuted_tokens_grad): 2L copies, 2*H*ts bytes.
//  - probs, padded (11/111): row = one permuted row. Scalar loads: both indices + its prob. Per chunk 2 in
//    (unpermuted grad, permuted tokens) + 1 out (permuted grad); then 1 copy of its prob grad (pts bytes). Plus, in
//    Init, InitOutput zero-fills the WHOLE probs_grad (tokensNum*E) on every core, idle ones included.
//  - probs, not padded (1/101): row = one token and its K = topK permuted rows. Scalar loads: K out_index entries
//    and K probs. Copies: its routing_map row in (E int8 bytes), per chunk 1 unpermuted row in + K grads out + K
//    permuted rows in, then its probs_grad row out (E*pts); plus one InitOutput zero-fill of the core's own
//    probs_grad rows. indicesReserveNum only batches the scalar index loads; it merges no copies.
// Each InitOutput counts as one copy (it is a library loop over UB-sized DataCopies); Init then calls SyncAll()
// before Process, so the zero-fill is also counted apart (initCopies, initBytes). Simplification: every index
// is live and each routing_map row holds exactly topK chosen experts.
std::vector<CoreWork> unpermuteWithRoutingMapGradWork(const UnpermuteWithRoutingMapGradTiling &t, DType tokens,
                                                      DType probs, bool padded, bool hasProbs) {
  const DType probDtype = hasProbs ? probs : tokens;
  const int64_t expectedKey = (probDtype != tokens ? 100 : 0) + (padded ? 10 : 0) + (hasProbs ? 1 : 0);
  if (expectedKey != t.tilingKey)
    fail("MoeTokenUnpermuteWithRoutingMapGrad", "mode/dtypes do not match tiling key " + std::to_string(t.tilingKey));
  const int64_t ts = dtypeBytes(tokens), pts = dtypeBytes(probDtype);
  const int64_t loops = t.hiddenSizeLoopTimes;
  const int64_t rowBytes = loops > 0 ? t.hiddenSize * ts : 0;
  const int64_t e = t.numExpert, k = t.topK;

  std::vector<CoreWork> work(static_cast<size_t>(std::max<int64_t>(t.blockDim, 0)));
  for (int64_t core = 0; core < t.blockDim; ++core) {
    CoreWork &w = work[static_cast<size_t>(core)];
    const bool former = core < t.formerCoreNum;
    w.bufferCount = 2; // its input and output queues are double-buffered (ascend-tiling.md)
    if (hasProbs && !padded) {
      w.rows = former ? t.tokenNumEachCore : t.tokenNumTailCore;
      w.passes = w.rows * loops;
      w.scalarGmReads = w.rows * 2 * k;
      w.dataCopies = w.rows * (2 + loops * (1 + 2 * k));
      w.gmBytes = w.rows * (e + rowBytes * (1 + 2 * k) + e * pts);
      if (w.rows * e > 0) { // InitOutput of this core's probs_grad rows
        w.initCopies = 1;
        w.initBytes = w.rows * e * pts;
      }
      w.dataCopies += w.initCopies;
      w.gmBytes += w.initBytes;
      continue;
    }
    w.rows = former ? t.rowIdMapEachCore : t.rowIdMapTailCore;
    w.passes = w.rows * loops;
    if (!hasProbs) {
      w.scalarGmReads = w.rows * (padded ? 2 : 1);
      w.dataCopies = w.rows * 2 * loops;
      w.gmBytes = w.rows * 2 * rowBytes;
    } else {
      w.scalarGmReads = w.rows * 3;
      w.dataCopies = w.rows * (3 * loops + 1);
      w.gmBytes = w.rows * (3 * rowBytes + pts);
      if (t.tokensNum * e > 0) { // InitOutput of all of probs_grad, on every core
        w.initCopies = 1;
        w.initBytes = t.tokensNum * e * pts;
      }
      w.dataCopies += w.initCopies;
      w.gmBytes += w.initBytes;
    }
  }
  return work;
}

} // namespace moec::cann
