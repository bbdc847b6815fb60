#include "ring/problem.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "mask.hpp"
#include "names.hpp"

namespace rb::ring {

namespace {

// The config's names of layouts, both ways from one table (dtypes: attn::kDTypeNames).
const std::pair<Layout, const char*> kLayouts[] = {
    {Layout::Contiguous, "contiguous"}, {Layout::Zigzag, "zigzag"}, {Layout::Striped, "striped"}};

}  // namespace

const char* to_string(Layout l) {
  return name_of(kLayouts, l);
}
Layout layout_from_string(const std::string& s) {
  return value_of(kLayouts, s, "layout");
}
attn::DType dtype_from_string(const std::string& s) {
  return value_of(attn::kDTypeNames, s, "dtype");
}
const char* to_string(attn::DType t) {
  return name_of(attn::kDTypeNames, t);
}
std::vector<std::string> layout_names() {
  return names_of(kLayouts);
}
std::vector<std::string> dtype_names() {
  return names_of(attn::kDTypeNames);
}

float Problem::scale() const {
  return 1.0f / std::sqrt(static_cast<float>(head_dim));
}

std::vector<attn::Pattern> Problem::patterns() const {
  std::vector<attn::Pattern> out;
  if (branches.empty()) {
    attn::Pattern pat;
    pat.causal = causal;
    out.push_back(pat);
  }
  for (const Branch& b : branches) {
    attn::Pattern pat;
    pat.causal = causal;
    pat.segment = b.segment;
    pat.rate = b.rate;
    out.push_back(pat);
  }
  return out;
}

std::string problem_error(const Problem& p) {
  const std::string S = std::to_string(p.seq_len), R = std::to_string(p.ring_size);
  if (p.batch < 1 || p.heads < 1 || p.head_dim < 1)
    return "batch, heads and head_dim must be >= 1 (got " + std::to_string(p.batch) + ", " +
           std::to_string(p.heads) + ", " + std::to_string(p.head_dim) + ")";
  if (p.ring_size < 1) return "ring size must be >= 1 (got " + R + ")";
  if (p.kv_heads < 0 || p.kv_heads > p.heads || (p.kv_heads > 0 && p.heads % p.kv_heads != 0))
    return "num_kv_heads " + std::to_string(p.kv_heads) + " must divide num_heads " +
           std::to_string(p.heads) + " (each K/V head serves num_heads / num_kv_heads query heads)";
  if (p.seq_len < 1) return "sequence length must be >= 1 (got " + S + ")";
  if (p.layout == Layout::Zigzag && p.seq_len % (2 * p.ring_size) != 0)
    return "zigzag layout needs the sequence length divisible by 2 x ring size: " + S + " % " +
           std::to_string(2 * p.ring_size) + " = " + std::to_string(p.seq_len % (2 * p.ring_size));
  if (p.seq_len % p.ring_size != 0)
    return "sequence length must be divisible by the ring size: " + S + " % " + R + " = " +
           std::to_string(p.seq_len % p.ring_size);
  for (std::size_t i = 0; i < p.branches.size(); ++i) {
    const Branch& b = p.branches[i];
    const std::string w = std::to_string(b.segment), r = std::to_string(b.rate),
                      at = "branch " + std::to_string(i) + ": ";
    if (b.segment < 1) return at + "segment length must be >= 1 (got " + w + ")";
    if (b.rate < 1) return at + "dilation rate must be >= 1 (got " + r + ")";
    if (b.rate > b.segment)
      return at + "dilation rate " + r + " is larger than segment length " + w;
    if (b.segment % b.rate != 0)
      return at + "segment length must be divisible by its dilation rate: " + w + " % " + r +
             " = " + std::to_string(b.segment % b.rate);
    if (b.segment > p.seq_len)
      return at + "segment length " + w + " is longer than the sequence length " + S;
    if (p.seq_len % b.segment != 0)
      return at + "sequence length must be divisible by the segment length: " + S + " % " + w +
             " = " + std::to_string(p.seq_len % b.segment);
  }
  return {};
}

void check_problem(const Problem& p) {
  const std::string e = problem_error(p);
  if (!e.empty()) throw std::invalid_argument(e);
}

std::vector<attn::Span> local_spans(const Problem& p, int r) {
  const std::int64_t n = p.local_rows(), R = p.ring_size;
  switch (p.layout) {
    case Layout::Contiguous:
      return {attn::Span{0, n, r * n, 1}};
    case Layout::Zigzag: {
      const std::int64_t c = n / 2;
      return {attn::Span{0, c, r * c, 1}, attn::Span{c, c, (2 * R - 1 - r) * c, 1}};
    }
    case Layout::Striped:
      return {attn::Span{0, n, r, R}};
  }
  return {};
}

std::vector<std::int64_t> local_positions(const Problem& p, int r) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(p.local_rows()));
  for (const attn::Span& s : local_spans(p, r))
    for (std::int64_t i = 0; i < s.count; ++i)
      pos[static_cast<std::size_t>(s.row0 + i)] = s.position(i);
  return pos;
}

std::int64_t pair_count(const Problem& p, int q_rank, int kv_rank) {
  const auto qs = local_spans(p, q_rank), ks = local_spans(p, kv_rank);
  std::int64_t total = 0;
  for (const attn::Pattern& pat : p.patterns()) {
    // Heads with the same head % rate see the same pairs.
    const std::int64_t classes = std::min<std::int64_t>(pat.rate, p.heads);
    for (std::int64_t h = 0; h < classes; ++h) {
      const std::int64_t heads_in_class = (p.heads - h + pat.rate - 1) / pat.rate;
      std::int64_t per_head = 0;
      for (const attn::Span& q : qs)
        for (const attn::Span& k : ks) {
          if (!attn::may_interact(q, k, pat)) continue;
          for (std::int64_t i = 0; i < q.count; ++i)
            per_head += attn::partners(q.position(i), k, pat, static_cast<int>(h), true).count();
        }
      total += per_head * heads_in_class;
    }
  }
  return total * p.batch;
}

std::vector<std::int64_t> step_pairs(const Problem& p, int ring_rank) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(p.ring_size));
  for (int s = 0; s < p.ring_size; ++s)
    out[static_cast<std::size_t>(s)] =
        pair_count(p, ring_rank, kv_owner(ring_rank, s, p.ring_size));
  return out;
}

}  // namespace rb::ring
