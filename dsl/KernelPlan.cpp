//===- KernelPlan.cpp - Which kernels an op specializes to ----------------===//
#include "moec/dsl/KernelPlan.h"

#include <optional>

namespace moec::dsl {

Bindings specializationBindings(const OpDef &op, const std::set<std::string> &present,
                                const std::map<std::string, int64_t> &statics) {
  Bindings known;
  for (const TensorDecl &t : op.tensors)
    if (t.optional)
      known.present[t.name] = present.count(t.name) > 0;
  for (const auto &[name, value] : statics) {
    known.values[name] = value;
    if (const AttrDecl *a = op.findAttr(name))
      known.values[a->innerName()] = value;
  }
  return known;
}

std::optional<bool> decide(const Expr &cond, const Bindings &known) {
  try {
    return evalBool(cond, known);
  } catch (const EvalError &) {
    return std::nullopt;
  }
}

namespace {

int countAssigns(const std::vector<Stmt> &stmts) {
  int n = 0;
  for (const Stmt &s : stmts) {
    n += s.assign.has_value();
    if (s.forStmt)
      n += countAssigns(s.forStmt->body);
    if (s.ifStmt)
      n += countAssigns(s.ifStmt->thenBody) + countAssigns(s.ifStmt->elseBody);
  }
  return n;
}

class Planner {
public:
  Planner(const OpDef &op, const Bindings &known) : op(op), known(known), single(countAssigns(op.body) == 1) {}

  std::vector<PlannedKernel> plan(bool fuseRowStores) {
    std::vector<PathStep> path;
    walk(op.body, path);
    if (fuseRowStores)
      fuseRows(op, known, kernels);
    return std::move(kernels);
  }

private:
  void walk(const std::vector<Stmt> &stmts, std::vector<PathStep> &path) {
    size_t mark = path.size();
    for (const Stmt &s : stmts) {
      if (s.let) {
        path.push_back({&*s.let});
      } else if (s.assign) {
        add(*s.assign, path);
      } else if (s.forStmt) {
        path.push_back({nullptr, nullptr, true, s.forStmt.get()});
        walk(s.forStmt->body, path);
        path.pop_back();
      } else if (s.ifStmt) {
        std::optional<bool> taken = decide(*s.ifStmt->cond, known);
        for (bool branch : {true, false}) {
          const std::vector<Stmt> &body = branch ? s.ifStmt->thenBody : s.ifStmt->elseBody;
          if (taken && *taken != branch) {
            counter += countAssigns(body); // keeps the names of later kernels stable
            continue;
          }
          path.push_back({nullptr, s.ifStmt.get(), branch});
          walk(body, path);
          path.pop_back();
        }
      }
    }
    path.resize(mark);
  }

  void add(const Assign &assign, const std::vector<PathStep> &path) {
    int index = counter++;
    const TensorDecl &target = op.tensors[assign.tensorIndex];
    if (target.optional) {
      auto it = known.present.find(target.name);
      if (it == known.present.end() || !it->second)
        return; // an optional output this specialization does not produce
    }
    PlannedKernel k;
    k.name = single ? op.name : op.name + "__" + std::to_string(index) + "_" + assign.target;
    k.assign = &assign;
    k.path = path;
    for (const PathStep &step : path)
      if (step.forStmt) {
        k.scatter = true;
        for (const ExprPtr &bound : step.forStmt->bounds)
          k.domain.push_back(bound.get());
      }
    for (size_t i = 0; i < assign.indices.size(); ++i)
      if (!assign.indexExprs[i])
        k.domain.push_back(target.shape[i].size.get());
    kernels.push_back(std::move(k));
  }

  const OpDef &op;
  const Bindings &known;
  bool single;
  int counter = 0;
  std::vector<PlannedKernel> kernels;
};

} // namespace

std::vector<PlannedKernel> planKernels(const OpDef &op, const Bindings &known, bool fuseRowStores) {
  return Planner(op, known).plan(fuseRowStores);
}

} // namespace moec::dsl
