#pragma once
// How a ring block pair maps onto fused-attention library calls (cuDNN SDPA), which know
// only two masks: none, and top-left causal (key row j <= query row i). A block pair with
// global positions and a causal pattern becomes at most two such calls on row ranges of the
// two spans; each call's result is merged by log-sum-exp like any other block, so the split
// is exact. Pure host code: tested without a GPU.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "attention.hpp"

namespace rb::attn::gpu {

// Rows [q_off, q_off + q_count) of the query span against rows [k_off, k_off + k_count) of
// the key span; causal: key row k_off + j takes part for query row q_off + i iff j <= i.
struct SdpaPiece {
  std::int64_t q_off = 0, q_count = 0;
  std::int64_t k_off = 0, k_count = 0;
  bool causal = false;
};

inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// The pieces for one block pair, or nothing when the library masks cannot express it
// (dilated / segmented patterns, causal spans with different position strides): the caller
// then uses another path for that block. An empty vector means no pair takes part.
inline std::optional<std::vector<SdpaPiece>> split_for_sdpa(const Span& q, const Span& kv,
                                                            const Pattern& p) {
  std::vector<SdpaPiece> pieces;
  if (p.segment > 0 || p.rate != 1) return std::nullopt;
  if (q.count <= 0 || kv.count <= 0) return pieces;
  const std::int64_t nq = q.count, nk = kv.count;
  if (!p.causal) {
    pieces.push_back({0, nq, 0, nk, false});
    return pieces;
  }
  if (q.stride != kv.stride || q.stride <= 0) return std::nullopt;
  // kv.first + j*s <= q.first + i*s  <=>  j <= i + c  with c = floor((q.first - kv.first) / s).
  const std::int64_t c = floor_div(q.first - kv.first, q.stride);
  if (c >= nk - 1) {  // even query row 0 sees every key
    pieces.push_back({0, nq, 0, nk, false});
    return pieces;
  }
  if (c + nq - 1 < 0) return pieces;  // even the last query row sees no key
  // Causal pieces keep only the keys some query row sees (j <= i < q_count).
  if (c > 0) {
    // Keys [0, c) are seen by every query row; keys c + j' by rows i >= j'.
    pieces.push_back({0, nq, 0, c, false});
    pieces.push_back({0, nq, c, std::min(nk - c, nq), true});
  } else {
    // Query rows i < -c see nothing; rows -c + i' see keys j <= i'.
    pieces.push_back({-c, nq + c, 0, std::min(nk, nq + c), true});
  }
  return pieces;
}

}  // namespace rb::attn::gpu
