//===- PtxEmuAliasWarpTest.cpp - shfl.sync / vote.sync whose destination is a source -===//
//
// moec's PTX today gives every shuffle and vote a fresh destination register; a later lowering (or ptxas-
// style register reuse in hand-written PTX) may well write the result over one of the sources. The PTX ISA
// (sections cited by title and page anchor, whose numbers shift between ISA versions; 9.2 and 9.6 do not)
// defines each instruction as a function of its operands' values before it executes:
//  - 9.2, "PTX Instructions": "the d operand is the destination operand, while a, b, and c are source
//    operands"; each instruction's Semantics (9.6: "described using C") reads its sources and then assigns
//    d, so a destination that is also a source is read first.
//  - "Data Movement and Conversion Instructions: shfl.sync" (#data-movement-and-conversion-instructions-
//    shfl-sync): SourceA[lane] = a is taken in every active lane, then "d = SourceA[j]; // copy input a from
//    lane j". The CUDA C++ Programming Guide (Warp Shuffle Functions) says it in words: "the exchange occurs
//    simultaneously for all active threads within the warp". So with d == a every lane reads lane j's value
//    from before the instruction, never one another lane has already written.
//  - "Parallel Synchronization and Communication Instructions: vote.sync" (#parallel-synchronization-and-
//    communication-instructions-vote-sync): a reduction (.all/.any/.uni) or a ballot of the source predicate
//    "across all non-exited threads in membermask": every member's predicate is an input, so none may be the
//    result another member has already written.
// Expected values are computed here from the ISA's pseudocode with plain C++ integer arithmetic. ptxas
// (CUDA 13.0, -arch=sm_90) accepts every kernel here as written.
//===----------------------------------------------------------------------===//
#include "PtxEmuFixture.h"

namespace moec::ptxemu::testing {
namespace {

class PtxEmuAliasWarp : public PtxEmuFixture {};

/// The value each lane starts with in the shuffle tests: distinct, so a value from the wrong lane shows.
uint32_t value(int lane) { return uint32_t(lane) * 3 + 100; }

// Each lane writes 12 words: the shuffles' results (and their predicates as 0/1) in the order below.
const std::string kShflAlias = ptx(R"PTX(
.visible .entry shfl_alias(.param .u64 .ptr .align 1 shfl_alias_param_0)
{
  .reg .pred %p<4>;
  .reg .b32 %r<24>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [shfl_alias_param_0];
  mov.u32 %r1, %laneid;
  mad.lo.u32 %r2, %r1, 3, 100;
  mov.b32 %r3, %r2;
  mov.b32 %r4, %r2;
  mov.b32 %r5, %r2;
  mov.b32 %r6, %r2;
  mov.b32 %r12, %r2;
  shfl.sync.bfly.b32 %r3, %r3, 1, 31, -1;
  shfl.sync.up.b32 %r4|%p1, %r4, 1, 0, -1;
  selp.u32 %r13, 1, 0, %p1;
  shfl.sync.down.b32 %r5, %r5, 1, 31, -1;
  sub.u32 %r7, 31, %r1;
  shfl.sync.idx.b32 %r6, %r6, %r7, 31, -1;
  mad.lo.u32 %r8, %r1, 7, 3;
  and.b32 %r8, %r8, 31;
  shfl.sync.idx.b32 %r8, %r8, %r8, 31, -1;
  add.u32 %r9, %r1, 3;
  shfl.sync.idx.b32 %r9, %r2, %r9, 31, -1;
  mov.u32 %r10, 0x101f;
  shfl.sync.down.b32 %r10|%p2, %r2, 2, %r10, -1;
  selp.u32 %r14, 1, 0, %p2;
  mov.u32 %r11, -1;
  shfl.sync.bfly.b32 %r11, %r2, 2, 31, %r11;
  shfl.sync.up.b32 %r12|%p3, %r12, 5, 0x1800, -1;
  selp.u32 %r15, 1, 0, %p3;
  mul.wide.u32 %rd2, %r1, 48;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v4.b32 [%rd3], {%r3, %r4, %r13, %r5};
  st.global.v4.b32 [%rd3+16], {%r6, %r8, %r9, %r10};
  st.global.v4.b32 [%rd3+32], {%r14, %r11, %r12, %r15};
  ret;
}
)PTX");

TEST_F(PtxEmuAliasWarp, ShflSyncReadsEveryLanesSourceBeforeAnyLaneWrites) {
  uint64_t dOut = zeros<uint32_t>(32 * 12);
  run(kShflAlias, "shfl_alias", {1}, {32}, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 32 * 12);
  for (int lane = 0; lane < 32; ++lane) {
    SCOPED_TRACE("lane " + std::to_string(lane));
    const uint32_t *o = &out[size_t(lane) * 12];
    // bfly 1, c = 31 (maxLane 31): j = lane ^ 1, always in range. Written in place, an odd lane would read
    // its even neighbour's already exchanged value (its own) back.
    EXPECT_EQ(o[0], value(lane ^ 1)) << "bfly, d == a";
    // up 1, c = 0: maxLane = 0, j = lane - 1, pval = j >= 0; lane 0 keeps its own value. Lanes written in
    // ascending order in place would all end with lane 0's value.
    EXPECT_EQ(o[1], lane >= 1 ? value(lane - 1) : value(lane)) << "up, d == a";
    EXPECT_EQ(o[2], lane >= 1 ? 1u : 0u) << "up's predicate";
    // down 1, c = 31: j = lane + 1, pval = j <= 31; lane 31 keeps its own value.
    EXPECT_EQ(o[3], lane + 1 <= 31 ? value(lane + 1) : value(lane)) << "down, d == a";
    // idx, b = 31 - lane: each half of the warp reads the other half, reversed.
    EXPECT_EQ(o[4], value(31 - lane)) << "idx, d == a";
    // idx with d == a == b: a = (7 lane + 3) & 31 (a permutation of the lanes, 7 being odd), bval = b[4:0] = a,
    // so d = a[a[lane]], both a's from before the instruction.
    uint32_t a = uint32_t(lane * 7 + 3) & 31;
    EXPECT_EQ(o[5], (a * 7 + 3) & 31) << "idx, d == a == b";
    // idx with d == b: bval = (lane + 3)[4:0].
    EXPECT_EQ(o[6], value((lane + 3) & 31)) << "idx, d == b";
    // down 2 with d == c, c = 0x101f: cval = 31, mask = c[12:8] = 0x10 (two segments of 16 lanes),
    // maxLane = (lane & 0x10) | (31 & ~0x10) = (lane & 0x10) | 15.
    int maxLane = (lane & 0x10) | 15;
    EXPECT_EQ(o[7], lane + 2 <= maxLane ? value(lane + 2) : value(lane)) << "down, d == c";
    EXPECT_EQ(o[8], lane + 2 <= maxLane ? 1u : 0u) << "down's predicate, d == c";
    // bfly 2 with d == membermask (-1): every lane's mask is read (all 32) before any lane's d is written.
    EXPECT_EQ(o[9], value(lane ^ 2)) << "bfly, d == membermask";
    // up 5 in place in segments of 8 lanes: c = 0x1800, mask = 0x18, cval = 0, maxLane = lane & 0x18 (the
    // segment's first lane), pval = lane - 5 >= maxLane.
    bool in = lane - 5 >= (lane & 0x18);
    EXPECT_EQ(o[10], in ? value(lane - 5) : value(lane)) << "segmented up, d == a";
    EXPECT_EQ(o[11], in ? 1u : 0u) << "segmented up's predicate";
  }
}

// Two warps shuffle in place at once, and the first warp's lanes 16..31 are predicated off a second in-place
// shuffle among lanes 0..15 only (membermask 0xffff): the exchange reads only the members' old values, and
// a lane that does not execute it keeps its register.
TEST_F(PtxEmuAliasWarp, ShflSyncInPlaceAmongPartOfTheWarp) {
  const std::string text = ptx(R"PTX(
.visible .entry shfl_part(.param .u64 .ptr .align 1 shfl_part_param_0)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [shfl_part_param_0];
  mov.u32 %r1, %tid.x;
  mad.lo.u32 %r2, %r1, 3, 100;
  shfl.sync.bfly.b32 %r2, %r2, 16, 31, -1;
  mov.u32 %r3, %laneid;
  setp.lt.u32 %p1, %r3, 16;
  @%p1 shfl.sync.down.b32 %r2, %r2, 4, 15, 0xffff;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
)PTX");
  uint64_t dOut = zeros<uint32_t>(64);
  run(text, "shfl_part", {1}, {64}, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 64);
  for (int t = 0; t < 64; ++t) {
    int warp = t / 32, lane = t % 32;
    // After the first shuffle lane L of a warp holds the value of thread (warp, L ^ 16).
    auto first = [&](int l) { return value(warp * 32 + (l ^ 16)); };
    uint32_t expected = first(lane);
    // The second: lanes 0..15 only, down 4, c = 15: maxLane = 15, j = lane + 4 in range when j <= 15.
    if (lane < 16)
      expected = lane + 4 <= 15 ? first(lane + 4) : first(lane);
    EXPECT_EQ(out[size_t(t)], expected) << "thread " << t;
  }
}

// Each lane writes 9 words (48 bytes apart): the votes' results (0/1) and a ballot, in the order below.
// A result written over its lane's source predicate flips that lane's contribution when the source is
// negated (any / all of !p) or when the reduction compares lanes (uni): the cases that show a vote reading
// a member's predicate after writing it.
const std::string kVoteAlias = ptx(R"PTX(
.visible .entry vote_alias(.param .u64 .ptr .align 1 vote_alias_param_0)
{
  .reg .pred %p<12>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [vote_alias_param_0];
  mov.u32 %r1, %laneid;
  setp.eq.u32 %p1, %r1, 5;
  vote.sync.any.pred %p1, %p1, -1;
  setp.ne.u32 %p2, %r1, 7;
  vote.sync.all.pred %p2, %p2, -1;
  setp.lt.u32 %p3, %r1, 31;
  vote.sync.uni.pred %p3, %p3, -1;
  setp.eq.u32 %p4, %r1, 0;
  vote.sync.all.pred %p4, !%p4, -1;
  setp.lt.u32 %p5, %r1, 32;
  vote.sync.uni.pred %p5, !%p5, -1;
  setp.eq.u32 %p6, %r1, 31;
  vote.sync.any.pred %p6, %p6, -1;
  setp.ne.u32 %p8, %r1, 0;
  vote.sync.any.pred %p8, !%p8, -1;
  setp.eq.u32 %p9, %r1, 0;
  vote.sync.uni.pred %p9, %p9, -1;
  mov.u32 %r2, -1;
  and.b32 %r3, %r1, 1;
  setp.eq.u32 %p7, %r3, 1;
  vote.sync.ballot.b32 %r2, %p7, %r2;
  selp.u32 %r4, 1, 0, %p1;
  selp.u32 %r5, 1, 0, %p2;
  selp.u32 %r6, 1, 0, %p3;
  selp.u32 %r7, 1, 0, %p4;
  selp.u32 %r8, 1, 0, %p5;
  selp.u32 %r9, 1, 0, %p6;
  selp.u32 %r10, 1, 0, %p8;
  selp.u32 %r11, 1, 0, %p9;
  mul.wide.u32 %rd2, %r1, 48;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v4.b32 [%rd3], {%r4, %r5, %r6, %r7};
  st.global.v4.b32 [%rd3+16], {%r8, %r9, %r2, %r10};
  st.global.b32 [%rd3+32], %r11;
  ret;
}
)PTX");

TEST_F(PtxEmuAliasWarp, VoteSyncReadsEveryMembersPredicateBeforeAnyWrite) {
  uint64_t dOut = zeros<uint32_t>(32 * 12);
  run(kVoteAlias, "vote_alias", {1}, {32}, dOut);
  std::vector<uint32_t> out = download<uint32_t>(dOut, 32 * 12);
  for (int lane = 0; lane < 32; ++lane) {
    SCOPED_TRACE("lane " + std::to_string(lane));
    const uint32_t *o = &out[size_t(lane) * 12];
    // .any of (lane == 5): true for some member, so true in every lane, lanes 0..4 included (their own
    // predicates, and the ones written before them, are false).
    EXPECT_EQ(o[0], 1u) << "any, d == a";
    // .all of (lane != 7): lane 7's is false, so false everywhere.
    EXPECT_EQ(o[1], 0u) << "all, d == a";
    // .uni of (lane < 31): lane 31 differs, so false everywhere.
    EXPECT_EQ(o[2], 0u) << "uni, d == a";
    // .all of !(lane == 0): lane 0's negated predicate is false.
    EXPECT_EQ(o[3], 0u) << "all of a negated source, d == a";
    // .uni of !(lane < 32): false in every lane, the same everywhere: true.
    EXPECT_EQ(o[4], 1u) << "uni of a negated source, d == a";
    // .any of (lane == 31): only the last lane's predicate holds, and lanes 0..30 must still see it.
    EXPECT_EQ(o[5], 1u) << "any, the last lane only";
    // ballot of (lane odd) with d == membermask (-1): bit L set for the odd lanes.
    EXPECT_EQ(o[6], 0xAAAAAAAAu) << "ballot, d == membermask";
    // .any of !(lane != 0): only lane 0's negated predicate holds; writing true over lane 0's p makes its
    // !p false, which a later lane must not see.
    EXPECT_EQ(o[7], 1u) << "any of a negated source, d == a, lane 0 only";
    // .uni of (lane == 0): lane 0 differs from the rest: false everywhere, although writing false over
    // lane 0's p would make all of them equal.
    EXPECT_EQ(o[8], 0u) << "uni, d == a, lane 0 differs";
  }
}

} // namespace
} // namespace moec::ptxemu::testing
