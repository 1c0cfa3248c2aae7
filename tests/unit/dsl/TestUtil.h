//===- TestUtil.h - Shared helpers for the DSL unit tests -------*- C++ -*-===//
#pragma once

#include "moec/dsl/Parser.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace moec::dsl::test {

inline std::string refOpPath() { return std::string(MOEC_SOURCE_DIR) + "/ops/moe_init_routing_v2_grad.moe"; }

/// A minimal valid op around `body` statements, for expression-level tests:
///   line 1: op t<T: f16 | bf16 | f32>
///   line 2: dim N: runtime, H: static
///   line 3: attr top_k as K: static, mode: runtime = 0, flag: static bool = false
///   line 4: in x: T[N, H], idx: i32[N * K] in [0, N), b: bf16[H], m: bool[N]
///   line 5: out y: T[N, H]
///   line 6: {
///   line 7: <body>
///   line 8: }
inline std::string wrapBody(const std::string &body) {
  return "op t<T: f16 | bf16 | f32>\n"
         "dim N: runtime, H: static\n"
         "attr top_k as K: static, mode: runtime = 0, flag: static bool = false\n"
         "in x: T[N, H], idx: i32[N * K] in [0, N), b: bf16[H], m: bool[N]\n"
         "out y: T[N, H]\n"
         "{\n" +
         body + "\n}\n";
}

/// Parses `expr` as the condition of a require, without semantic checks (printing and host evaluation
/// need none). The op declares the type parameter T.
inline std::unique_ptr<OpDef> parseCondition(const std::string &expr) {
  std::string text = "op t<T: f16 | f32> require " + expr + " : \"m\" { }";
  return parseOp(std::make_shared<SourceFile>(SourceFile{"expr.moe", text}));
}

} // namespace moec::dsl::test
