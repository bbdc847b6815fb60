#pragma once
// The rows of a span that take part for one head under a dilated (LongNet) branch: only
// positions p with p % rate == head % rate do, and with positions first + i*stride those rows
// form an arithmetic progression i = i0 + j*step. View index j -> buffer row row0 + j*step,
// position pos0 + j*pos_step. Exact attention (segment 0 or rate 1) keeps every row.
// Plain C++ usable on the host and, compiled by nvcc, on the device: the CUDA kernels read
// these views by address arithmetic, and the cuDNN path turns them into tensor strides.
#include <cstdint>

#include "attention.hpp"
#include "host_device.hpp"

namespace rb::attn {

RB_HOST_DEVICE inline std::int64_t floor_mod(std::int64_t a, std::int64_t m) {
  std::int64_t r = a % m;
  return r < 0 ? r + m : r;
}

struct RowView {
  std::int64_t row0;
  std::int64_t step;
  std::int64_t count;
  std::int64_t pos0;
  std::int64_t pos_step;
  RB_HOST_DEVICE std::int64_t row(std::int64_t j) const { return row0 + j * step; }
  RB_HOST_DEVICE std::int64_t pos(std::int64_t j) const { return pos0 + j * pos_step; }
};

RB_HOST_DEVICE inline RowView make_row_view(const Span& s, std::int64_t segment, std::int64_t rate,
                                            int head) {
  RowView v{s.row0, 1, s.count, s.first, s.stride};
  if (segment <= 0 || rate <= 1 || s.count <= 0) return v;
  const std::int64_t r = rate;
  const std::int64_t off = head % r;
  // Smallest i in [0, r) with (first + i*stride) % r == off; the pattern repeats with period
  // r / gcd(stride, r), which is then the step.
  std::int64_t i0 = -1;
  for (std::int64_t i = 0; i < r && i < s.count; ++i)
    if (floor_mod(s.first + i * s.stride, r) == off) {
      i0 = i;
      break;
    }
  if (i0 < 0) {
    v.count = 0;
    return v;
  }
  std::int64_t a = floor_mod(s.stride, r), b = r;
  while (b != 0) {
    const std::int64_t t = a % b;
    a = b;
    b = t;
  }
  const std::int64_t step = r / a;  // a = gcd(stride mod r, r) (gcd(0, r) = r)
  v.row0 = s.row0 + i0;
  v.step = step;
  v.count = (s.count - i0 + step - 1) / step;
  v.pos0 = s.first + i0 * s.stride;
  v.pos_step = s.stride * step;
  return v;
}

}  // namespace rb::attn
