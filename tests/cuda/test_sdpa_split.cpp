// The block-pair split for fused-attention libraries (kernels/cuda/sdpa_split.hpp) against
// brute force: every allowed (query row, key row) pair is covered by exactly one piece under
// that piece's mask, no masked pair by any. Host only: runs in CI without a GPU.
#include <doctest/doctest.h>

#include <random>
#include <set>

#include "sdpa_split.hpp"

using namespace rb::attn;

namespace {

// How many pieces let query row i see key row j.
int coverage(const std::vector<gpu::SdpaPiece>& pieces, std::int64_t i, std::int64_t j) {
  int n = 0;
  for (const auto& p : pieces) {
    const std::int64_t a = i - p.q_off, b = j - p.k_off;
    if (a < 0 || a >= p.q_count || b < 0 || b >= p.k_count) continue;
    if (p.causal && b > a) continue;
    ++n;
  }
  return n;
}

// Whether cover(h, i, j), the calls that let head h's query row i see key row j (rows of the
// spans), is 1 where the pattern allows the pair and 0 elsewhere, for every head and row pair
// (each counted into `checked`); the first that is not fails the test.
template <class Cover>
bool covers_exactly(const Span& q, const Span& k, const Pattern& pat, int heads, Cover cover,
                    int& checked) {
  for (int h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < q.count; ++i)
      for (std::int64_t j = 0; j < k.count; ++j) {
        const int want = pat.allows(q.position(i), k.position(j), h) ? 1 : 0;
        const int c = cover(h, i, j);
        if (c != want) {
          CAPTURE(h);
          CAPTURE(i);
          CAPTURE(j);
          CHECK(c == want);
          return false;
        }
        ++checked;
      }
  return true;
}

}  // namespace

TEST_CASE("sdpa split covers exactly the allowed pairs of random causal block pairs") {
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int> count(1, 40), first(0, 300), stride(1, 4);
  int checked = 0, split2 = 0, empty = 0, full = 0;
  for (int t = 0; t < 3000; ++t) {
    Span q{0, count(rng), first(rng), stride(rng)};
    Span k{0, count(rng), first(rng), q.stride};
    // A one-row span's stride does not matter: give it another one now and then.
    if (q.count == 1) q.stride = stride(rng);
    if (k.count == 1) k.stride = stride(rng);
    Pattern pat;
    pat.causal = t % 5 != 0;
    const auto pieces = gpu::split_for_sdpa(q, k, pat);
    REQUIRE(pieces.has_value());
    if (pieces->size() == 2) ++split2;
    if (pieces->empty()) ++empty;
    if (pieces->size() == 1 && !(*pieces)[0].causal) ++full;
    for (const auto& p : *pieces) {
      CHECK(p.q_count > 0);
      CHECK(p.k_count > 0);
      CHECK(p.q_off + p.q_count <= q.count);
      CHECK(p.k_off + p.k_count <= k.count);
    }
    CAPTURE(t);
    CAPTURE(q.first);
    CAPTURE(k.first);
    CAPTURE(q.stride);
    const auto cover = [&](int, std::int64_t i, std::int64_t j) { return coverage(*pieces, i, j); };
    if (!covers_exactly(q, k, pat, 1, cover, checked)) return;
  }
  // Every branch of the split was exercised.
  CHECK(split2 > 0);
  CHECK(empty > 0);
  CHECK(full > 0);
  CHECK(checked > 100000);
}

TEST_CASE("sdpa split refuses what the library masks cannot express") {
  Span q{0, 64, 0, 1}, k{0, 64, 0, 1};
  Pattern dilated;
  dilated.segment = 32;
  dilated.rate = 2;
  CHECK_FALSE(gpu::split_for_sdpa(q, k, dilated).has_value());
  Pattern causal;
  causal.causal = true;
  Span k3{0, 64, 0, 3};
  CHECK_FALSE(gpu::split_for_sdpa(q, k3, causal).has_value());
  // Non-causal exact attention does not care about strides.
  CHECK(gpu::split_for_sdpa(q, k3, Pattern{}).value().size() == 1);
  // One query row with its own stride (a ring's last row against a strided block).
  CHECK(gpu::split_for_sdpa(Span{0, 1, 500, 1}, Span{0, 77, 0, 7}, causal).has_value());
  // Empty spans: nothing to do.
  CHECK(gpu::split_for_sdpa(Span{0, 0, 0, 1}, k, causal).value().empty());
}

TEST_CASE("sdpa head groups cover exactly the allowed (head, query row, key row) triples") {
  std::mt19937_64 rng(777);
  std::uniform_int_distribution<int> count(1, 48), first(0, 400), stride(1, 4), heads(1, 6);
  const std::int64_t rates[] = {1, 2, 3, 4, 8};
  int checked = 0, groups_seen = 0, strided_views = 0, multi_segment = 0;
  for (int t = 0; t < 1500; ++t) {
    Pattern pat;
    pat.causal = t % 3 != 0;
    if (t % 4 != 0) {  // three in four dilated
      pat.rate = rates[t % 5];
      pat.segment = pat.rate * std::uniform_int_distribution<int>(1, 12)(rng);
    }
    const int H = heads(rng);
    Span q{3, count(rng), first(rng), stride(rng)};
    Span k{1, count(rng), first(rng), q.stride};
    const auto groups = gpu::split_groups_for_sdpa(q, k, pat, H);
    REQUIRE(groups.has_value());
    // cover[h][i][j]: how many calls let head h's query row i see key row j (rows of the spans)
    std::vector<int> cover(std::size_t(H) * q.count * k.count, 0);
    for (const auto& g : *groups) {
      ++groups_seen;
      if (g.q.step > 1) ++strided_views;
      CHECK(g.heads >= 1);
      std::set<std::int64_t> segs;
      for (const auto& pc : g.pieces) {
        REQUIRE(pc.q_off + pc.q_count <= g.q.count);
        REQUIRE(pc.k_off + pc.k_count <= g.kv.count);
        if (pat.segment > 0) segs.insert(g.q.pos(pc.q_off) / pat.segment);
        for (int hh = 0; hh < g.heads; ++hh) {
          const int h = g.offset + hh * g.head_step;
          REQUIRE(h < H);
          for (std::int64_t a = 0; a < pc.q_count; ++a)
            for (std::int64_t b = 0; b < pc.k_count; ++b) {
              if (pc.causal && b > a) continue;
              const std::int64_t i = g.q.row(pc.q_off + a) - q.row0,
                                 j = g.kv.row(pc.k_off + b) - k.row0;
              ++cover[(std::size_t(h) * q.count + i) * k.count + j];
            }
        }
      }
      if (segs.size() > 1) ++multi_segment;
    }
    CAPTURE(t);
    CAPTURE(pat.segment);
    CAPTURE(pat.rate);
    const auto covered = [&](int h, std::int64_t i, std::int64_t j) {
      return cover[(std::size_t(h) * q.count + i) * k.count + j];
    };
    if (!covers_exactly(q, k, pat, H, covered, checked)) return;
  }
  CHECK(groups_seen > 0);
  CHECK(strided_views > 0);  // some groups read every step-th row
  CHECK(multi_segment > 0);  // some groups span several segments
  CHECK(checked > 100000);
}
