#include "kernel_shape.hpp"

#include <algorithm>

namespace rb::attn {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return b > 0 ? (a + b - 1) / b : 0;
}

}  // namespace

KernelShape kernel_shape_of(const Dims& dims, const Pattern& pattern) {
  KernelShape s;
  const std::int64_t bh = std::int64_t(dims.batch) * dims.heads;
  if (pattern.segment <= 0) {
    s.sub_rows = dims.q_rows;
    s.sub_keys = dims.kv_rows;
    s.heads_per_call = bh;
    s.calls = 1;
    return s;
  }
  // A block shorter than a segment holds part of one; a longer one holds q_rows / segment of
  // them (a partial last one counts as a call).
  const std::int64_t rate = std::max<std::int64_t>(1, pattern.rate);
  const std::int64_t offsets = std::min<std::int64_t>(rate, std::max(1, dims.heads));
  s.dilated = true;
  s.sub_rows = ceil_div(std::min(pattern.segment, dims.q_rows), rate);
  s.sub_keys = ceil_div(std::min(pattern.segment, dims.kv_rows), rate);
  s.heads_per_call = std::int64_t(dims.batch) * ceil_div(dims.heads, rate);
  s.calls = ceil_div(dims.q_rows, pattern.segment) * offsets;
  return s;
}

}  // namespace rb::attn
