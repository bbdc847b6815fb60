// The block-pair split for fused-attention libraries (kernels/cuda/sdpa_split.hpp) against
// brute force: every allowed (query row, key row) pair is covered by exactly one piece under
// that piece's mask, no masked pair by any. Host only: runs in CI without a GPU.
#include <doctest/doctest.h>

#include <random>

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

}  // namespace

TEST_CASE("sdpa split covers exactly the allowed pairs of random causal block pairs") {
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int> count(1, 40), first(0, 300), stride(1, 4);
  int checked = 0, split2 = 0, empty = 0, full = 0;
  for (int t = 0; t < 3000; ++t) {
    Span q{0, count(rng), first(rng), stride(rng)};
    Span k{0, count(rng), first(rng), q.stride};
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
    for (std::int64_t i = 0; i < q.count; ++i)
      for (std::int64_t j = 0; j < k.count; ++j) {
        const bool allowed = pat.allows(q.position(i), k.position(j), 0);
        const int c = coverage(*pieces, i, j);
        if (c != (allowed ? 1 : 0)) {
          CAPTURE(t); CAPTURE(i); CAPTURE(j); CAPTURE(q.first); CAPTURE(k.first); CAPTURE(q.stride);
          CHECK(c == (allowed ? 1 : 0));
          return;
        }
        ++checked;
      }
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
  // Empty spans: nothing to do.
  CHECK(gpu::split_for_sdpa(Span{0, 0, 0, 1}, k, causal).value().empty());
}
