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
  // after sm_90 with the same IR, bf16 after f32 with other IR.
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

// The second compile of the same specialization takes the first one's code; a compile that asks for the
// optimized IR or the host assembly runs LLVM (those texts are not kept) and still gets the same code.
TEST(GeneratedCode, ASecondCompileSkipsLlvmAndPrintedStagesStillRunIt) {
  auto op = load("moe_init_routing_v2_grad");
  Specialization spec{dsl::DType::BF16, {{"H", 96}, {"top_k", 3}}, Target::ptx("sm_90"), {}};
  spec.schedule.unroll = 3; // a schedule no other test compiles: the first compile misses
  CompiledOp first = compile(*op, spec);
  CompiledOp second = compile(*op, spec);
  EXPECT_FALSE(first.times.reusedCode);
  EXPECT_TRUE(second.times.reusedCode);
  EXPECT_EQ(second.ptx, first.ptx);
  EXPECT_TRUE(second.dumps.empty());
  CompiledOp printed = compile(*op, spec, {{Stage::LLVM, Stage::PTX}});
  EXPECT_FALSE(printed.times.reusedCode);
  EXPECT_EQ(printed.ptx, first.ptx);
  CompileOptions fresh{{Stage::LLVM}};
  fresh.reuseGeneratedCode = false;
  EXPECT_EQ(printed.dumps.at(Stage::LLVM), compile(*op, spec, fresh).dumps.at(Stage::LLVM))
      << "the printed IR is not the optimized IR";
}

} // namespace
