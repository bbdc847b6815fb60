#include "kernel_policy.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace rb::attn {
namespace {

using Coords = std::array<double, 4>;

Coords coords_of(const KernelShape& s) {
  auto lg = [](std::int64_t v) { return std::log2(double(std::max<std::int64_t>(v, 1))); };
  return {lg(s.sub_rows), lg(s.sub_keys), lg(s.heads_per_call), lg(s.calls)};
}

// Log2 steps from `at` to the box spanned by two measured shapes (0 inside).
double distance(const Coords& at, const Coords& a, const Coords& b) {
  double d = 0.0;
  for (std::size_t i = 0; i < at.size(); ++i) {
    const double lo = std::min(a[i], b[i]), hi = std::max(a[i], b[i]);
    d += at[i] < lo ? lo - at[i] : (at[i] > hi ? at[i] - hi : 0.0);
  }
  return d;
}

bool same_kind(const PolicyShape& rule, DType dtype, int head_dim, const Pattern& pattern) {
  return rule.dtype == dtype && rule.head_dim == head_dim && rule.causal == pattern.causal &&
         (rule.segment > 0) == (pattern.segment > 0);
}

}  // namespace

std::pair<KernelShape, KernelShape> KernelPolicy::measured(const PolicyRule& rule,
                                                           const PolicyRange& range) const {
  Dims dims;
  dims.batch = grid_batch;
  dims.heads = grid_heads;
  dims.head_dim = rule.shape.head_dim;
  Pattern pattern;
  pattern.causal = rule.shape.causal;
  pattern.segment = rule.shape.segment;
  pattern.rate = rule.shape.segment > 0 ? rule.shape.rate : 1;
  // The tuning sweep times ring size 1: queries and keys are the same block.
  dims.q_rows = dims.kv_rows = range.rows_min;
  const KernelShape lo = kernel_shape_of(dims, pattern);
  dims.q_rows = dims.kv_rows = range.rows_max;
  return {lo, kernel_shape_of(dims, pattern)};
}

const KernelPath* KernelPolicy::pick(DType dtype, const Dims& dims, const Pattern& pattern) const {
  const Coords at = coords_of(kernel_shape_of(dims, pattern));
  const PolicyRule* best_rule = nullptr;
  const PolicyRange* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const PolicyRule& rule : rules) {
    if (!same_kind(rule.shape, dtype, dims.head_dim, pattern) || rule.ranges.empty()) continue;
    for (const PolicyRange& range : rule.ranges) {
      const auto [lo, hi] = measured(rule, range);
      const double d = distance(at, coords_of(lo), coords_of(hi));
      if (d < best_distance) {
        best_rule = &rule;
        best = &range;
        best_distance = d;
      }
    }
  }
  if (best == nullptr) return nullptr;
  // Between a rule's ranges the nearest decides; beyond them only within reach: far from
  // everything measured, the built-in rule decides, not a guess.
  const Coords first = coords_of(measured(*best_rule, best_rule->ranges.front()).first);
  const Coords last = coords_of(measured(*best_rule, best_rule->ranges.back()).second);
  return distance(at, first, last) <= kPolicyReach ? best->row : nullptr;
}

bool KernelPolicy::names(const std::string& path) const {
  for (const PolicyRule& rule : rules)
    for (const PolicyRange& r : rule.ranges)
      if (r.row != nullptr && path == r.row->name) return true;
  return false;
}

KernelPicker::Pick KernelPicker::pick(DType dtype, const Dims& dims, const Pattern& pattern) const {
  if (fixed_ != nullptr) return {fixed_, false};
  if (policy_ != nullptr) {
    if (const KernelPath* row = policy_->pick(dtype, dims, pattern)) return {row, true};
  }
  return {auto_kernel_path(device_, dtype, dims.head_dim, pattern.causal,
                           kernel_shape_of(dims, pattern)),
          false};
}

}  // namespace rb::attn
