#include "kernel_policy.hpp"

#include <cmath>

namespace rb::attn {

PolicyShape shape_of(DType dtype, int head_dim, const Pattern& pattern) {
  PolicyShape s;
  s.dtype = dtype;
  s.head_dim = head_dim;
  s.causal = pattern.causal;
  if (pattern.segment > 0) {
    s.segment = pattern.segment;
    s.rate = pattern.rate;
  }
  return s;
}

namespace {

// Distance from `rows` to [lo, hi] by ratio: 0 inside, else log2 of how far outside.
double ratio_distance(std::int64_t rows, std::int64_t lo, std::int64_t hi) {
  if (rows < lo) return std::log2(double(lo) / double(rows));
  if (rows > hi) return std::log2(double(rows) / double(hi));
  return 0.0;
}

}  // namespace

const KernelPath* KernelPolicy::pick(const PolicyShape& shape, std::int64_t rows) const {
  for (const PolicyRule& rule : rules) {
    if (!(rule.shape == shape) || rule.ranges.empty()) continue;
    // Outside the tuned rows nothing was measured: the built-in rule, not a guess.
    if (rows < rule.ranges.front().rows_min || rows > rule.ranges.back().rows_max) return nullptr;
    const PolicyRange* best = nullptr;
    double best_distance = 0.0;
    for (const PolicyRange& r : rule.ranges) {
      const double d = ratio_distance(rows, r.rows_min, r.rows_max);
      if (best == nullptr || d < best_distance) {
        best = &r;
        best_distance = d;
      }
    }
    return best->row;
  }
  return nullptr;
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
    if (const KernelPath* row = policy_->pick(shape_of(dtype, dims.head_dim, pattern), dims.q_rows))
      return {row, true};
  }
  return {auto_kernel_path(device_, dtype, dims.head_dim, pattern.causal, pattern.segment > 0),
          false};
}

}  // namespace rb::attn
