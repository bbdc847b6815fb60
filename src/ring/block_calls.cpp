#include "ring/block_calls.hpp"

#include <cstddef>
#include <set>
#include <utility>

#include "mask.hpp"

namespace rb::ring {
namespace {

using attn::Pattern;
using attn::Span;

std::int64_t last_position(const Span& s) {
  return s.position(s.count - 1);
}

bool same_spans(const std::vector<Span>& a, const std::vector<Span>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].row0 != b[i].row0 || a[i].count != b[i].count || a[i].first != b[i].first ||
        a[i].stride != b[i].stride)
      return false;
  return true;
}

// The spans, taken in the order given, are adjacent rows (each starts where the previous ends).
bool adjacent_rows(const std::vector<const Span*>& spans) {
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i]->row0 != spans[i - 1]->row0 + spans[i - 1]->count) return false;
  return !spans.empty();
}

// Adjacent rows whose positions increase strictly from the first row to the last.
bool increasing(const std::vector<Span>& spans) {
  std::vector<const Span*> all;
  for (const Span& s : spans) {
    if (s.count <= 0 || (s.count > 1 && s.stride <= 0)) return false;
    if (!all.empty() && s.first <= last_position(*all.back())) return false;
    all.push_back(&s);
  }
  return adjacent_rows(all);
}

// Every query position of q sees every key position of kv (dense branch).
bool fully_visible(const Span& q, const Span& kv, const Pattern& pat) {
  return !pat.causal || last_position(kv) <= q.first;
}

// One span over the rows of `spans` (adjacent), with row indices as positions.
Span rows_of(const std::vector<const Span*>& spans) {
  Span s;
  s.row0 = spans.front()->row0;
  for (const Span* x : spans) s.count += x->count;
  s.first = 0;
  s.stride = 1;
  return s;
}

// The dense branch's calls as one merged call, or nothing when it cannot be merged.
bool merge_dense(const std::vector<Span>& qs, const std::vector<Span>& ks, const Pattern& pat,
                 const std::vector<std::pair<std::size_t, std::size_t>>& pairs,
                 std::vector<BlockCall>& out) {
  if (pairs.size() < 2) return false;  // nothing to merge
  std::vector<const Span*> all_q, all_k;
  for (const Span& s : qs) all_q.push_back(&s);
  for (const Span& s : ks) all_k.push_back(&s);
  if (pat.causal && same_spans(qs, ks) && increasing(qs)) {
    out.push_back({rows_of(all_q), rows_of(all_k), pat, true});
    return true;
  }
  std::set<std::size_t> qi, ki;
  for (const auto& [i, j] : pairs) {
    if (!fully_visible(qs[i], ks[j], pat)) return false;
    qi.insert(i);
    ki.insert(j);
  }
  if (pairs.size() != qi.size() * ki.size()) return false;  // not a rectangle of span pairs
  std::vector<const Span*> q_used, k_used;
  for (std::size_t i : qi) q_used.push_back(&qs[i]);
  for (std::size_t j : ki) k_used.push_back(&ks[j]);
  if (!adjacent_rows(q_used) || !adjacent_rows(k_used)) return false;
  Pattern unmasked = pat;
  unmasked.causal = false;  // every pair attends
  out.push_back({rows_of(q_used), rows_of(k_used), unmasked, true});
  return true;
}

}  // namespace

std::vector<BlockCall> block_calls(const std::vector<Span>& q_spans,
                                   const std::vector<Span>& kv_spans,
                                   const std::vector<Pattern>& patterns) {
  std::vector<BlockCall> calls;
  for (const Pattern& pat : patterns) {
    std::vector<std::pair<std::size_t, std::size_t>> pairs;
    for (std::size_t i = 0; i < q_spans.size(); ++i)
      for (std::size_t j = 0; j < kv_spans.size(); ++j)
        if (attn::may_interact(q_spans[i], kv_spans[j], pat)) pairs.emplace_back(i, j);
    const bool dense = pat.segment == 0 && pat.rate == 1;
    if (dense && merge_dense(q_spans, kv_spans, pat, pairs, calls)) continue;
    for (const auto& [i, j] : pairs) calls.push_back({q_spans[i], kv_spans[j], pat, false});
  }
  return calls;
}

std::vector<std::vector<BlockCall>> calls_per_owner(const Problem& p, int rank) {
  const std::vector<Span> mine = local_spans(p, rank);
  std::vector<std::vector<BlockCall>> out;
  for (int owner = 0; owner < p.ring_size; ++owner)
    out.push_back(block_calls(mine, local_spans(p, owner), p.patterns()));
  return out;
}

}  // namespace rb::ring
