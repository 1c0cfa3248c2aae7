//===- RowFusionTest.cpp - Which row assignments planKernels fuses into dot products ----------------===//
#include "TestUtil.h"

#include "moec/dsl/KernelPlan.h"

namespace moec::dsl {
namespace {

/// A point assignment `d[n]` with a dot product over H, and a row assignment `y[n, h]` at the same point,
/// each statement a parameter: `%D` is d's value, `%Y` the row statement.
std::string pointAndRow(const std::string &d, const std::string &y) {
  std::string text = R"(op fuse<T: bf16 | f32>
  dim N: runtime, H: static
  in x: T[N, H]
  in w: f32[N]
  in z: T[N, H]
  out d: f32[N]
  out y: T[N, H]
{
  for n < N {
    let s = w[n]
    d[n] = %D
    %Y
  }
}
)";
  text.replace(text.find("%D"), 2, d);
  text.replace(text.find("%Y"), 2, y);
  return text;
}

std::vector<PlannedKernel> plan(const OpDef &op, bool fuse) {
  return planKernels(op, specializationBindings(op, {}, {{"H", 64}}), fuse);
}

const char *const kDot = "s > 0.0 ? sum(j < H) (f32(x[n, j]) * f32(z[n, j])) : 0.0";

TEST(RowFusion, RowUnderTheSumsConditionRunsInsideIt) {
  auto op = loadOpText("fuse.moe", pointAndRow(kDot, "if s > 0.0 { y[n, h] = T(f32(x[n, h]) * s) }"));
  std::vector<PlannedKernel> fused = plan(*op, true);
  ASSERT_EQ(fused.size(), 1u);
  ASSERT_TRUE(fused[0].fusedRows.has_value());
  const FusedRows &rows = *fused[0].fusedRows;
  EXPECT_EQ(rows.assign->target, "y");
  EXPECT_EQ(rows.name, "fuse__1_y");
  EXPECT_EQ(rows.sum, fused[0].assign->value->operands[1].get()) << "the select's then-branch";
  EXPECT_EQ(rows.common, 2u);    // the for and `let s`
  EXPECT_EQ(rows.guardFrom, 2u); // `if s > 0.0`
  // Without fusion: both kernels, neither fused.
  std::vector<PlannedKernel> plain = plan(*op, false);
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_FALSE(plain[0].fusedRows || plain[1].fusedRows);
}

TEST(RowFusion, RowsWhereTheSumMayNotRunStayAKernel) {
  // Unguarded rows, or a guard that does not imply the sum's: the sum would not run for every row stored.
  for (const char *row : {"y[n, h] = x[n, h]", "if s < 1.0 { y[n, h] = x[n, h] }",
                          "if s > 0.0 { } else { y[n, h] = x[n, h] }"}) {
    SCOPED_TRACE(row);
    auto op = loadOpText("fuse.moe", pointAndRow(kDot, row));
    std::vector<PlannedKernel> kernels = plan(*op, true);
    EXPECT_EQ(kernels.size(), 2u);
  }
  // An unconditional sum runs for every point: any guard will do.
  auto op = loadOpText("fuse.moe", pointAndRow("sum(j < H) (f32(x[n, j]))", "y[n, h] = x[n, h]"));
  EXPECT_EQ(plan(*op, true).size(), 1u);
}

TEST(RowFusion, OrderAndShapesKeepKernelsApart) {
  // (Outputs are write-only and inputs read-only, so neither statement can read what the other writes.)
  struct Case {
    const char *d, *y, *why;
    size_t kernels;
  };
  for (const Case &c : {
           Case{"sum(j < H) (f32(x[n, j]))", "if x[n, 0] > T(0.0) { y[n, h] = T(0.0) }\n    y[n, h] = x[n, h]",
                "a kernel between them writes the rows' tensor: moving the rows' stores would reorder them", 3},
           Case{"sum(j < 8) (f32(x[n, j]))", "y[n, h] = x[n, h]", "the sum does not run along the rows", 2},
           Case{"s", "y[n, h] = x[n, h]", "no sum", 2},
           Case{kDot, "if x[n, 0] > T(0.0) { y[n, h] = x[n, h] }", "the rows' guard reads a tensor", 2},
       }) {
    SCOPED_TRACE(c.why);
    auto op = loadOpText("fuse.moe", pointAndRow(c.d, c.y));
    EXPECT_EQ(plan(*op, true).size(), c.kernels);
  }
}

TEST(RowFusion, BuiltinA3FusesWithProbsOnly) {
  auto op = loadOpFile(std::string(MOEC_SOURCE_DIR) + "/ops/moe_token_unpermute_with_routing_map_grad.moe");
  for (bool pad : {false, true}) {
    SCOPED_TRACE(pad ? "drop_and_pad" : "non-pad");
    std::set<std::string> with = {"permuted_tokens", "probs", "probs_grad"};
    if (!pad)
      with.insert("routing_map");
    Bindings known = specializationBindings(*op, with, {{"E", 8}, {"H", 64}, {"drop_and_pad", pad}});
    std::vector<PlannedKernel> kernels = planKernels(*op, known, true);
    int fusedKernels = 0;
    for (const PlannedKernel &k : kernels)
      if (k.fusedRows) {
        ++fusedKernels;
        EXPECT_EQ(k.assign->target, "probs_grad");
        EXPECT_EQ(k.fusedRows->assign->target, "permuted_tokens_grad");
      }
    EXPECT_EQ(fusedKernels, 1);
    EXPECT_EQ(kernels.size() + 1, planKernels(*op, known, false).size());
    // Without probs there is no dot product to run in.
    Bindings noProbs = specializationBindings(*op, pad ? std::set<std::string>{} : std::set<std::string>{"routing_map"},
                                              {{"E", 8}, {"H", 64}, {"drop_and_pad", pad}});
    for (const PlannedKernel &k : planKernels(*op, noProbs, true))
      EXPECT_FALSE(k.fusedRows) << k.name;
  }
}

} // namespace
} // namespace moec::dsl
