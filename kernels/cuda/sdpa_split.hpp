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
#include "row_view.hpp"

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
  // A span of one row has no stride of its own: take the other's.
  const std::int64_t qs = nq == 1 ? kv.stride : q.stride, ks = nk == 1 ? qs : kv.stride;
  if (qs != ks || qs <= 0) return std::nullopt;
  // kv.first + j*s <= q.first + i*s  <=>  j <= i + c  with c = floor((q.first - kv.first) / s).
  const std::int64_t c = floor_div(q.first - kv.first, qs);
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

// The library calls for one block pair and all heads. Heads h = offset, offset + head_step, ...
// (`heads` of them) share the row views q and kv; pieces index rows of those views. Exact
// attention is one group (offset 0, head_step 1, views = the spans). A dilated branch has one
// group per head offset modulo the rate (each reading every step-th row, i.e. a strided
// tensor) and, inside it, one set of pieces per segment both views reach.
struct SdpaGroup {
  int offset = 0, head_step = 1, heads = 0;
  RowView q{}, kv{};
  std::vector<SdpaPiece> pieces;
};

inline std::optional<std::vector<SdpaGroup>> split_groups_for_sdpa(const Span& q, const Span& kv,
                                                                   const Pattern& p, int heads) {
  std::vector<SdpaGroup> groups;
  if (p.segment <= 0) {
    if (p.rate != 1) return std::nullopt;
    auto pieces = split_for_sdpa(q, kv, p);
    if (!pieces) return std::nullopt;
    SdpaGroup g;
    g.heads = heads;
    g.q = make_row_view(q, 0, 1, 0);
    g.kv = make_row_view(kv, 0, 1, 0);
    g.pieces = std::move(*pieces);
    if (!g.pieces.empty()) groups.push_back(std::move(g));
    return groups;
  }
  if (p.rate < 1 || p.segment % p.rate != 0 || q.stride <= 0 || kv.stride <= 0) return std::nullopt;
  const std::int64_t w = p.segment;
  Pattern causal_only;
  causal_only.causal = p.causal;
  for (int off = 0; off < heads && off < p.rate; ++off) {
    SdpaGroup g;
    g.offset = off;
    g.head_step = int(p.rate);
    g.heads = (heads - off + int(p.rate) - 1) / int(p.rate);
    g.q = make_row_view(q, w, p.rate, off);
    g.kv = make_row_view(kv, w, p.rate, off);
    if (g.q.count <= 0 || g.kv.count <= 0) continue;
    if (p.causal && g.q.pos_step != g.kv.pos_step) return std::nullopt;
    // View indices [lo, hi) of a view whose positions fall in segment s.
    auto seg_range = [w](const RowView& v, std::int64_t s, std::int64_t& lo, std::int64_t& hi) {
      auto first_at_or_after = [&](std::int64_t pos) {  // smallest j with v.pos(j) >= pos
        const std::int64_t d = pos - v.pos0;
        return d <= 0 ? 0 : (d + v.pos_step - 1) / v.pos_step;
      };
      lo = std::min(first_at_or_after(s * w), v.count);
      hi = std::min(first_at_or_after((s + 1) * w), v.count);
    };
    const std::int64_t s_lo = std::max(g.q.pos(0) / w, g.kv.pos(0) / w);
    const std::int64_t s_hi = std::min(g.q.pos(g.q.count - 1) / w, g.kv.pos(g.kv.count - 1) / w);
    for (std::int64_t sg = s_lo; sg <= s_hi; ++sg) {
      std::int64_t qa, qb, ka, kb;
      seg_range(g.q, sg, qa, qb);
      seg_range(g.kv, sg, ka, kb);
      if (qa >= qb || ka >= kb) continue;
      const Span qs{qa, qb - qa, g.q.pos(qa), g.q.pos_step};
      const Span ks{ka, kb - ka, g.kv.pos(ka), g.kv.pos_step};
      auto pieces = split_for_sdpa(qs, ks, causal_only);
      if (!pieces) return std::nullopt;
      for (SdpaPiece pc : *pieces) {
        pc.q_off += qa;
        pc.k_off += ka;
        g.pieces.push_back(pc);
      }
    }
    if (!g.pieces.empty()) groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace rb::attn::gpu
