#pragma once
// Exact enumeration of the attending pairs of a Pattern over Spans, in O(1) per row:
// the host kernels iterate exactly these pairs (no masked work), and the ring code counts
// them for the per-step work and the FLOP convention.
#include <cstdint>

#include "attention.hpp"
#include "host_device.hpp"

namespace rb::attn {

RB_HOST_DEVICE inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {  // b > 0
  std::int64_t q = a / b;
  if ((a % b != 0) && (a < 0)) --q;
  return q;
}
RB_HOST_DEVICE inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {  // b > 0
  return -floor_div(-a, b);
}
RB_HOST_DEVICE inline std::int64_t gcd64(std::int64_t a, std::int64_t b) {
  while (b != 0) {
    const std::int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// Indices begin, begin + step, ... (< end) of a span; empty when begin >= end.
struct IndexRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t step = 1;
  RB_HOST_DEVICE inline std::int64_t count() const {
    return begin >= end ? 0 : (end - begin + step - 1) / step;
  }
};

// The rows i of `other` whose positions pair with position `p` under `pat` for head `head`.
// other_are_keys: p is a query and `other` holds keys (k <= p when causal); otherwise p is
// a key and `other` holds queries (q >= p).
RB_HOST_DEVICE inline IndexRange partners(std::int64_t p, const Span& other, const Pattern& pat,
                                          int head, bool other_are_keys) {
  IndexRange none;
  std::int64_t lo = 0, hi = other.count;
  const std::int64_t f = other.first, st = other.stride;
  if (pat.causal) {
    if (other_are_keys) {
      const std::int64_t h = floor_div(p - f, st) + 1;
      if (h < hi) hi = h;
    } else {
      const std::int64_t l = ceil_div(p - f, st);
      if (l > lo) lo = l;
    }
  }
  std::int64_t step = 1;
  if (pat.segment > 0) {
    const std::int64_t w = pat.segment, r = pat.rate, off = head % r;
    if (p % r != off) return none;
    const std::int64_t seg0 = (p / w) * w;
    const std::int64_t l = ceil_div(seg0 - f, st);
    const std::int64_t h = floor_div(seg0 + w - 1 - f, st) + 1;
    if (l > lo) lo = l;
    if (h < hi) hi = h;
    if (r > 1 && lo < hi) {
      // (f + i*st) mod r repeats with period r / gcd(st, r) in i: find the first match.
      const std::int64_t period = r / gcd64(st, r);
      std::int64_t found = -1;
      for (std::int64_t j = 0; j < period && lo + j < hi; ++j)
        if ((f + (lo + j) * st) % r == off) {
          found = lo + j;
          break;
        }
      if (found < 0) return none;
      lo = found;
      step = period;
    }
  }
  if (lo >= hi) return none;
  IndexRange out;
  out.begin = lo;
  out.end = hi;
  out.step = step;
  return out;
}

// O(1) test: false only when no (q, k) pair of the two spans can attend for any head, so a
// ring step can skip the block pair entirely.
RB_HOST_DEVICE inline bool may_interact(const Span& q, const Span& kv, const Pattern& pat) {
  if (q.count <= 0 || kv.count <= 0) return false;
  const std::int64_t q_last = q.position(q.count - 1), k_last = kv.position(kv.count - 1);
  if (pat.causal && kv.first > q_last) return false;
  if (pat.segment > 0) {
    const std::int64_t w = pat.segment;
    if (k_last / w < q.first / w || kv.first / w > q_last / w) return false;
  }
  return true;
}

}  // namespace rb::attn
