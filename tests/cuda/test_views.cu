// Host checks (no GPU needed) of the index arithmetic the CUDA kernels rely on: the row views
// that realise the dilated branch without gathered copies, and the tile classification behind
// block skipping, both against brute force over random spans and patterns.
#include <doctest/doctest.h>

#include <random>
#include <type_traits>
#include <vector>

#include "common.cuh"
#include "mma.cuh"

using namespace rb::attn;
using namespace rb::attn::gpu;

namespace {

struct Trial {
  Span span;
  DevPattern pat;
  int head;
};

Trial random_trial(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> rate_d(1, 8), mult(1, 10), stride_d(1, 9), first_d(0, 100),
      count_d(0, 60), row_d(0, 5), head_d(0, 15), coin(0, 3);
  Trial t;
  const int rate = rate_d(rng);
  t.pat.causal = coin(rng) == 0;
  t.pat.rate = rate;
  t.pat.segment = (rate == 1 && coin(rng) != 0) ? 0 : rate * mult(rng);
  if (t.pat.segment == 0) t.pat.rate = 1;
  t.span = Span{row_d(rng), count_d(rng), first_d(rng), stride_d(rng)};
  t.head = head_d(rng);
  return t;
}

}  // namespace

TEST_CASE("row views hold exactly the rows of the head's dilation offset, in order") {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 5000; ++trial) {
    const Trial t = random_trial(rng);
    CAPTURE(trial);
    const RowView v = make_view(t.span, t.pat, t.head);
    std::vector<std::int64_t> rows, pos;
    for (std::int64_t i = 0; i < t.span.count; ++i) {
      const std::int64_t p = t.span.position(i);
      const bool takes_part =
          t.pat.segment <= 0 || t.pat.rate <= 1 || p % t.pat.rate == t.head % t.pat.rate;
      if (takes_part) {
        rows.push_back(t.span.row0 + i);
        pos.push_back(p);
      }
    }
    REQUIRE(v.count == std::int64_t(rows.size()));
    for (std::int64_t j = 0; j < v.count; ++j) {
      REQUIRE(v.row(j) == rows[std::size_t(j)]);
      REQUIRE(v.pos(j) == pos[std::size_t(j)]);
    }
  }
}

TEST_CASE("tile classification never skips an allowed pair nor unmasks a masked one") {
  std::mt19937_64 rng(std::random_device{}());
  std::size_t skipped = 0, full = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    Trial tq = random_trial(rng);
    Trial tk = random_trial(rng);
    tk.pat = tq.pat;
    tk.head = tq.head;
    const RowView qv = make_view(tq.span, tq.pat, tq.head);
    const RowView kv = make_view(tk.span, tk.pat, tk.head);
    if (qv.count == 0 || kv.count == 0) continue;
    std::uniform_int_distribution<std::int64_t> qa(0, qv.count - 1), ka(0, kv.count - 1);
    std::int64_t q0 = qa(rng), q1 = qa(rng), k0 = ka(rng), k1 = ka(rng);
    if (q0 > q1) std::swap(q0, q1);
    if (k0 > k1) std::swap(k0, k1);
    const int c = classify_tile(tq.pat, qv.pos(q0), qv.pos(q1), kv.pos(k0), kv.pos(k1));
    bool any = false, all = true;
    for (std::int64_t i = q0; i <= q1; ++i)
      for (std::int64_t j = k0; j <= k1; ++j) {
        const bool a = view_allows(tq.pat, qv.pos(i), kv.pos(j));
        // Inside the views the dilation condition holds: the short mask equals the full one.
        REQUIRE(a == pattern_allows(tq.pat, qv.pos(i), kv.pos(j), tq.head));
        any = any || a;
        all = all && a;
      }
    CAPTURE(trial);
    if (c == 0) CHECK_FALSE(any);
    if (c == 2) CHECK(all);
    skipped += c == 0;
    full += c == 2;
  }
  // Both shortcuts must actually fire on random tiles, or the test proves nothing.
  CHECK(skipped > 100);
  CHECK(full > 100);
}

// The flash kernels address ldmatrix fragments and cp.async destinations by shortcuts that
// hold only for this swizzle: an even chunk step is an XOR on a per-thread offset, and a
// step of 16 rows (ldmatrix) or of a multiple of 8 rows (tile loads) keeps the swizzle phase.
TEST_CASE("swizzled tile offsets: chunk steps are XORs, row steps immediates") {
  auto check = [](auto cols_c) {
    constexpr int COLS = decltype(cols_c)::value;
    for (int r = 0; r < 64; ++r)
      for (int c0 = 0; c0 < 2; ++c0)
        for (int k = 0; k < COLS / 16; ++k)
          for (int i = 0; i < 4; ++i)
            REQUIRE(mma::swz_bytes<COLS>(r + 16 * i, c0 + 2 * k) ==
                    mma::kstep(mma::swz_bytes<COLS>(r, c0), k) + std::uint32_t(i * 32 * COLS));
    // tile_load.cuh: a thread copies chunk c of rows r0 + i * rows_per_pass
    for (int threads : {128, 256}) {
      const int rows_per_pass = threads / (COLS / 8);
      for (int tid = 0; tid < threads; ++tid) {
        const int c = tid % (COLS / 8), r0 = tid / (COLS / 8);
        for (int i = 0; i < 8; ++i)
          REQUIRE(mma::swz<COLS>(r0 + i * rows_per_pass, c) ==
                  mma::swz<COLS>(r0, c) + i * rows_per_pass * COLS);
      }
    }
    // and the swizzle stays a permutation of the chunks of each row
    for (int r = 0; r < 16; ++r) {
      std::vector<int> seen(COLS / 8, 0);
      for (int c = 0; c < COLS / 8; ++c) ++seen[(mma::swz<COLS>(r, c) - r * COLS) / 8];
      for (int n : seen) CHECK(n == 1);
    }
  };
  check(std::integral_constant<int, 64>{});
  check(std::integral_constant<int, 128>{});
}
