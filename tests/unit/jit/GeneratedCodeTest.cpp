//===- GeneratedCodeTest.cpp - Reused code is the code a fresh compile makes ---===//
//
// compile() takes the PTX or host object of an earlier compile in the process whose LLVM IR and target
// machine were the same (compiler/Targets/GeneratedCode.h). What it takes must be byte for byte what a
// compile without reuse generates, for every target, arch, dtype and schedule, in an order that puts a
// compile of the same IR for another machine, or of other IR for the same machine, just before it.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Pipeline.h"
#include "moec/compiler/PipelineTable.h"
#include "moec/dsl/Parser.h"
#include "moec/ops/BuiltinOps.h"

#include <gtest/gtest.h>

using namespace moec;

namespace {

std::unique_ptr<dsl::OpDef> load(const char *name) {
  const BuiltinOp *builtin = findBuiltinOp(name);
  return dsl::loadOpText(builtin->path, builtin->source);
}

/// The code compile() hands on: PTX text, or the host object.
std::string codeOf(const CompiledOp &compiled, const Target &target) {
  return target.kind == TargetKind::GPU ? compiled.ptx : compiled.cpuObject;
}

std::string compiled(const dsl::OpDef &op, const Specialization &spec, bool reuse) {
  CompileOptions options;
  options.reuseGeneratedCode = reuse;
  return codeOf(compile(op, spec, options), spec.target);
}

TEST(GeneratedCode, ReusedCodeIsTheCodeOfAFreshCompile) {
  auto op = load("moe_unpermute");
  // Optimizations off alone: some leave C2's IR as it is (a hit), some change it (a miss). sm_100 comes
  // after sm_90, whose module differs from it only in the arch; bf16 after f32, with other IR.
  std::vector<uint32_t> disabled = {0};
  for (const auto &[name, bit] : kOptimizationsByName)
    if (!(bit & kOptInOptimizations) && disabled.size() < 6)
      disabled.push_back(bit);
  for (Target target : {Target::cpu(), Target::ptx("sm_90"), Target::ptx("sm_100")})
    for (dsl::DType dtype : {dsl::DType::F32, dsl::DType::BF16})
      for (uint32_t bits : disabled) {
        Specialization spec{dtype, {{"H", 72}, {"E", 8}, {"K", 2}}, target, {}};
        spec.schedule.disabled = bits;
        SCOPED_TRACE(target.str() + " " + dsl::dtypeName(dtype) + " disabled " + std::to_string(bits));
        std::string reused = compiled(*op, spec, true);
        ASSERT_FALSE(reused.empty());
        EXPECT_TRUE(reused == compiled(*op, spec, false)) << "the reused code differs from a fresh compile's";
      }
}

// The second compile of the same specialization takes the first one's code. A compile that prints the
// optimized IR, as the runtime does for its disk cache, runs LLVM where the kept code came without its IR, and
// keeps the IR: the next such compile takes both, and the IR is a fresh compile's.
TEST(GeneratedCode, ASecondCompileSkipsLlvmAndKeepsThePrintedIr) {
  auto op = load("moe_init_routing_v2_grad");
  Specialization spec{dsl::DType::BF16, {{"H", 96}, {"top_k", 3}}, Target::ptx("sm_90"), {}};
  spec.schedule.unroll = 3; // a schedule no other test compiles: the first compile misses
  CompiledOp first = compile(*op, spec);
  CompiledOp second = compile(*op, spec);
  EXPECT_FALSE(first.times.reusedCode);
  EXPECT_TRUE(second.times.reusedCode);
  EXPECT_EQ(second.ptx, first.ptx);
  EXPECT_TRUE(second.dumps.empty());
  const CompileOptions printing{{Stage::LLVM, Stage::PTX}};
  CompiledOp printed = compile(*op, spec, printing);
  EXPECT_FALSE(printed.times.reusedCode) << "the kept code has no IR to print";
  EXPECT_EQ(printed.ptx, first.ptx);
  CompiledOp again = compile(*op, spec, printing);
  EXPECT_TRUE(again.times.reusedCode);
  EXPECT_EQ(again.ptx, first.ptx);
  CompileOptions fresh = printing;
  fresh.reuseGeneratedCode = false;
  const std::string optimized = compile(*op, spec, fresh).dumps.at(Stage::LLVM);
  EXPECT_EQ(printed.dumps.at(Stage::LLVM), optimized) << "the printed IR is not the optimized IR";
  EXPECT_EQ(again.dumps.at(Stage::LLVM), optimized) << "the kept IR is not the optimized IR";
}

// The runtime's compiles (the stages its disk cache keeps) of a CPU kernel whose configs differ in rows per
// task and threads, which the code does not see (the tuner's sweep), generate the code once.
TEST(GeneratedCode, CpuConfigsThatLeaveTheIrAloneShareTheirCode) {
  auto op = load("moe_unpermute");
  const CompileOptions runtimeStages{{Stage::Moe, Stage::Loops, Stage::LLVM}};
  Specialization spec{dsl::DType::F32, {{"H", 88}, {"E", 8}, {"K", 3}}, Target::cpu(), {}};
  spec.schedule.unroll = 3;
  spec.schedule.rowsPerBlock = 1;
  CompiledOp first = compile(*op, spec, runtimeStages);
  spec.schedule.rowsPerBlock = 16;
  spec.schedule.threads = 2;
  CompiledOp second = compile(*op, spec, runtimeStages);
  EXPECT_FALSE(first.times.reusedCode);
  EXPECT_TRUE(second.times.reusedCode);
  EXPECT_TRUE(second.cpuObject == first.cpuObject);
  EXPECT_EQ(second.dumps.at(Stage::LLVM), first.dumps.at(Stage::LLVM));
  ASSERT_TRUE(second.cpu);
  EXPECT_NE(second.cpu->lookup(second.kernels.front().name), nullptr) << "the reused object is not loaded";
}

} // namespace
