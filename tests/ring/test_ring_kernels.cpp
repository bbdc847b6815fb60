// Host kernels against a direct double-precision implementation (one rank): masks, spans with
// strides, several branches merged into the same accumulators, storage dtypes, pair counting.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "host/host_backend.hpp"
#include "kernel_paths.hpp"
#include "mask.hpp"
#include "ring/problem.hpp"
#include "ring_case.hpp"

using rb::attn::DType;
using rb::attn::Pattern;
using rb::attn::Span;

namespace {

struct Block {
  int batch = 1, heads = 3, d = 8;
  std::int64_t q_rows = 0, kv_rows = 0;
  std::vector<float> q, k, v, dout;
};

Block random_block(int batch, int heads, int d, std::int64_t q_rows, std::int64_t kv_rows,
                   unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Block b;
  b.batch = batch;
  b.heads = heads;
  b.d = d;
  b.q_rows = q_rows;
  b.kv_rows = kv_rows;
  auto fill = [&](std::vector<float>& t, std::int64_t rows) {
    t.resize(static_cast<std::size_t>(batch * heads * rows * d));
    for (auto& x : t) x = u(gen);
  };
  fill(b.q, q_rows);
  fill(b.k, kv_rows);
  fill(b.v, kv_rows);
  fill(b.dout, q_rows);
  return b;
}

// Direct reference: every (branch, q row, kv row) pair tested with Pattern::allows.
struct Direct {
  std::vector<double> out, lse, dq, dk, dv;
};

Direct direct(const Block& b, const std::vector<std::pair<Span, Span>>& pairs,
              const std::vector<Pattern>& pats, float scale) {
  const int d = b.d;
  Direct r;
  const std::size_t nq = static_cast<std::size_t>(b.batch * b.heads * b.q_rows);
  r.out.assign(nq * d, 0.0);
  r.lse.assign(nq, -std::numeric_limits<double>::infinity());
  r.dq.assign(nq * d, 0.0);
  r.dk.assign(static_cast<std::size_t>(b.batch * b.heads * b.kv_rows) * d, 0.0);
  r.dv = r.dk;
  auto row = [&](const std::vector<float>& t, std::int64_t bh, std::int64_t rows, std::int64_t i) {
    return &t[static_cast<std::size_t>((bh * rows + i) * d)];
  };
  struct Term {
    std::int64_t qi, kj;
    double s;
  };
  for (std::int64_t bh = 0; bh < b.batch * b.heads; ++bh) {
    const int h = static_cast<int>(bh % b.heads);
    std::vector<Term> terms;
    for (const auto& [qs, ks] : pairs)
      for (const Pattern& pat : pats)
        for (std::int64_t i = 0; i < qs.count; ++i)
          for (std::int64_t j = 0; j < ks.count; ++j)
            if (pat.allows(qs.position(i), ks.position(j), h)) {
              const float* q = row(b.q, bh, b.q_rows, qs.row0 + i);
              const float* k = row(b.k, bh, b.kv_rows, ks.row0 + j);
              double s = 0;
              for (int c = 0; c < d; ++c) s += double(q[c]) * k[c];
              terms.push_back({qs.row0 + i, ks.row0 + j, s * scale});
            }
    std::vector<double> m(static_cast<std::size_t>(b.q_rows), -INFINITY), l(m.size(), 0.0);
    for (auto& t : terms) m[t.qi] = std::max(m[t.qi], t.s);
    for (auto& t : terms) l[t.qi] += std::exp(t.s - m[t.qi]);
    for (std::int64_t i = 0; i < b.q_rows; ++i)
      if (l[i] > 0) r.lse[bh * b.q_rows + i] = m[i] + std::log(l[i]);
    for (auto& t : terms) {
      const double P = std::exp(t.s - r.lse[bh * b.q_rows + t.qi]);
      const float* v = row(b.v, bh, b.kv_rows, t.kj);
      for (int c = 0; c < d; ++c) r.out[(bh * b.q_rows + t.qi) * d + c] += P * v[c];
    }
    std::vector<double> delta(static_cast<std::size_t>(b.q_rows), 0.0);
    for (std::int64_t i = 0; i < b.q_rows; ++i) {
      const float* g = row(b.dout, bh, b.q_rows, i);
      for (int c = 0; c < d; ++c) delta[i] += g[c] * r.out[(bh * b.q_rows + i) * d + c];
    }
    for (auto& t : terms) {
      const double P = std::exp(t.s - r.lse[bh * b.q_rows + t.qi]);
      const float* g = row(b.dout, bh, b.q_rows, t.qi);
      const float* v = row(b.v, bh, b.kv_rows, t.kj);
      const float* q = row(b.q, bh, b.q_rows, t.qi);
      const float* k = row(b.k, bh, b.kv_rows, t.kj);
      double dp = 0;
      for (int c = 0; c < d; ++c) dp += double(g[c]) * v[c];
      const double ds = P * (dp - delta[t.qi]) * scale;
      for (int c = 0; c < d; ++c) {
        r.dq[(bh * b.q_rows + t.qi) * d + c] += ds * k[c];
        r.dk[(bh * b.kv_rows + t.kj) * d + c] += ds * q[c];
        r.dv[(bh * b.kv_rows + t.kj) * d + c] += P * g[c];
      }
    }
  }
  return r;
}

double max_err(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0;
  for (std::size_t i = 0; i < got.size(); ++i) e = std::max(e, std::abs(got[i] - want[i]));
  return e;
}

// What a host kernel path left in its accumulators after every forward, then every backward
// block.
struct Outputs {
  std::vector<float> out, lse, dq, dk, dv;
};

// The block's tensors as `dtype` storage (the kernels read that), and the values they hold
// (the reference reads those).
std::vector<std::uint16_t> to_16bit(const std::vector<float>& t, DType dtype) {
  std::vector<std::uint16_t> r(t.size());
  for (std::size_t i = 0; i < t.size(); ++i)
    r[i] = dtype == DType::BF16 ? rb::attn::float_to_bf16(t[i]) : rb::attn::float_to_half(t[i]);
  return r;
}

Block rounded(Block b, DType dtype) {
  for (auto* t : {&b.q, &b.k, &b.v, &b.dout})
    for (auto& x : *t) x = rb::attn::round_to_storage(x, dtype);
  return b;
}

// Runs host kernel path `path` on every (span pair, pattern): forward blocks, then backward.
Outputs run_path(const std::string& path, const Block& blk,
                 const std::vector<std::pair<Span, Span>>& pairs, const std::vector<Pattern>& pats,
                 DType dtype) {
  auto be = rb::attn::make_host_backend(rb::attn::KernelChoice{path, "default"});
  const float scale = 1.0f / std::sqrt(static_cast<float>(blk.d));
  const std::size_t nq = blk.q.size(), nk = blk.k.size();
  auto up = [&](const std::vector<float>& t) {
    const std::size_t bytes = t.size() * rb::attn::dtype_size(dtype);
    void* p = be->allocate(bytes);
    if (dtype == DType::F32) {
      be->copy_to_device(p, t.data(), bytes);
    } else {
      const auto h = to_16bit(t, dtype);
      be->copy_to_device(p, h.data(), bytes);
    }
    return p;
  };
  void *q = up(blk.q), *k = up(blk.k), *v = up(blk.v), *g = up(blk.dout);
  const std::int64_t rows = blk.batch * blk.heads * blk.q_rows;
  float* out = static_cast<float*>(be->allocate(nq * 4));
  float* lse = static_cast<float*>(be->allocate(rows * 4));
  float* delta = static_cast<float*>(be->allocate(rows * 4));
  float* dq = static_cast<float*>(be->allocate(nq * 4));
  float* dk = static_cast<float*>(be->allocate(nk * 4));
  float* dv = static_cast<float*>(be->allocate(nk * 4));
  be->init_forward(out, lse, rows, blk.d);
  be->fill_zero(dq, nq * 4);
  be->fill_zero(dk, nk * 4);
  be->fill_zero(dv, nk * 4);
  // Every (span pair, branch) block, with the fields forward and backward blocks share.
  auto each_block = [&](auto block, auto launch) {
    block.dims = rb::attn::Dims{blk.batch, blk.heads, blk.d, blk.q_rows, blk.kv_rows};
    block.dtype = dtype;
    block.scale = scale;
    block.q_data = q;
    block.k_data = k;
    block.v_data = v;
    for (const auto& [qs, ks] : pairs)
      for (const Pattern& pat : pats) {
        block.q = qs;
        block.kv = ks;
        block.pattern = pat;
        launch(block);
      }
  };
  rb::attn::ForwardBlock f;
  f.out = out;
  f.lse = lse;
  each_block(f, [&](const rb::attn::ForwardBlock& b) { be->forward(b); });
  be->backward_prepare(g, out, delta, rows, blk.d, dtype);
  each_block(rb::attn::BackwardBlock{{}, g, lse, delta, dq, dk, dv},
             [&](const rb::attn::BackwardBlock& b) { be->backward(b); });
  Outputs o{std::vector<float>(nq), std::vector<float>(rows), std::vector<float>(nq),
            std::vector<float>(nk), std::vector<float>(nk)};
  be->copy_to_host(o.out.data(), out, nq * 4);
  be->copy_to_host(o.lse.data(), lse, rows * 4);
  be->copy_to_host(o.dq.data(), dq, nq * 4);
  be->copy_to_host(o.dk.data(), dk, nk * 4);
  be->copy_to_host(o.dv.data(), dv, nk * 4);
  for (void* p : {q, k, v, g}) be->release(p);
  for (float* p : {out, lse, delta, dq, dk, dv}) be->release(p);
  return o;
}

std::vector<double> widened(const std::vector<float>& t) {
  return {t.begin(), t.end()};
}

void check_against(const Outputs& got, const Direct& want) {
  CHECK(max_err(got.out, want.out) < 1e-5);
  CHECK(max_err(got.dq, want.dq) < 1e-5);
  CHECK(max_err(got.dk, want.dk) < 1e-5);
  CHECK(max_err(got.dv, want.dv) < 1e-5);
  for (std::size_t i = 0; i < got.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      CHECK(std::isinf(got.lse[i]));
    } else {
      CHECK(std::abs(got.lse[i] - want.lse[i]) < 1e-5);
    }
  }
}

// Runs every host kernel path on every (span pair, pattern) in `dtype` storage, and compares
// each with direct() on the stored values and the materialized path with the kokkos path.
void check_kernels(const Block& blk, const std::vector<std::pair<Span, Span>>& pairs,
                   const std::vector<Pattern>& pats, DType dtype = DType::F32) {
  const Block stored = dtype == DType::F32 ? blk : rounded(blk, dtype);
  const float scale = 1.0f / std::sqrt(static_cast<float>(blk.d));
  const Direct want = direct(stored, pairs, pats, scale);
  const Outputs kokkos = run_path("kokkos", blk, pairs, pats, dtype);
  const Outputs mat = run_path("materialized", blk, pairs, pats, dtype);
  check_against(kokkos, want);
  check_against(mat, want);
  const Direct kk{widened(kokkos.out), widened(kokkos.lse), widened(kokkos.dq), widened(kokkos.dk),
                  widened(kokkos.dv)};
  check_against(mat, kk);
  // Something was actually computed (the test must be able to fail).
  double norm = 0;
  for (double x : want.dk) norm += std::abs(x);
  CHECK(norm > 0);
}

}  // namespace

TEST_CASE("host kernels: full and causal attention on one contiguous block") {
  const Block b = random_block(2, 3, 8, 24, 24, 1);
  const Span all{0, 24, 0, 1};
  for (bool causal : {false, true}) {
    Pattern pat;
    pat.causal = causal;
    check_kernels(b, {{all, all}}, {pat});
  }
}

TEST_CASE("host kernels: blocks merged by log-sum-exp across strided and shifted spans") {
  const Block b = random_block(1, 4, 16, 20, 30, 2);
  // Query rows hold positions 40, 43, ...; key rows come from three spans (contiguous before,
  // strided interleaved, contiguous after) merged into the same accumulators.
  const Span q{0, 20, 40, 3};
  const std::vector<std::pair<Span, Span>> pairs = {
      {q, Span{0, 10, 0, 1}}, {q, Span{10, 10, 41, 3}}, {q, Span{20, 10, 200, 1}}};
  for (bool causal : {false, true}) {
    Pattern pat;
    pat.causal = causal;
    check_kernels(b, pairs, {pat});
  }
}

TEST_CASE("host kernels: dilated branches (LongNet) with head offsets and several branches") {
  const Block b = random_block(2, 5, 8, 32, 32, 3);
  const Span q{0, 16, 0, 1}, q2{16, 16, 48, 1};
  const Span k{0, 16, 16, 1}, k2{16, 16, 0, 2};
  const std::vector<std::pair<Span, Span>> pairs = {{q, k}, {q, k2}, {q2, k}, {q2, k2}};
  for (bool causal : {false, true}) {
    std::vector<Pattern> pats;
    for (auto [w, r] : std::vector<std::pair<int, int>>{{8, 1}, {16, 2}, {32, 4}, {64, 8}}) {
      Pattern p;
      p.causal = causal;
      p.segment = w;
      p.rate = r;
      pats.push_back(p);
    }
    check_kernels(b, pairs, pats);
  }
}

TEST_CASE("host kernel paths: odd lengths over several 64-row tiles, fp32 and 16-bit storage") {
  // 2 x 3 x 37 = 222 query rows: tiles of the materialized path cross (batch, head) borders;
  // head dim 12 leaves a tail after the 8-lane dot products.
  const Block b = random_block(2, 3, 12, 37, 29, 11);
  const Span q{0, 37, 29, 1}, k{0, 29, 0, 1}, k_strided{0, 29, 1, 2};
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (bool causal : {false, true}) {
      CAPTURE(static_cast<int>(dtype));
      CAPTURE(causal);
      Pattern exact;
      exact.causal = causal;
      Pattern dilated = exact;
      dilated.segment = 33;
      dilated.rate = 3;
      check_kernels(b, {{q, k}, {q, k_strided}}, {exact}, dtype);
      check_kernels(b, {{q, k}}, {exact, dilated}, dtype);
    }
}

TEST_CASE("the host kernel paths are in the table, and the backend runs the row it is given") {
  using namespace rb::attn;
  CHECK(kernel_choices(Device::Host) == std::vector<std::string>{"auto", "kokkos", "materialized"});
  const KernelPath* row = find_kernel_path("materialized", Device::Host);
  REQUIRE(row != nullptr);
  CHECK(row->built);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    CHECK(kernel_refusal(KernelChoice{"materialized", "default"}, Device::Host, t, 256, true, true)
              .empty());
  CHECK_FALSE(kernel_refusal(KernelChoice{"materialized", "default"}, Device::Host, DType::F32, 257,
                             false, false)
                  .empty());
  CHECK(std::string(auto_kernel_path(Device::Host, DType::BF16, 64, true, KernelShape{})->name) ==
        "kokkos");
  // auto refuses what the row it would run cannot take, and names a tile it was given.
  CHECK(kernel_refusal(KernelChoice{"auto", "default"}, Device::Host, DType::F32, 64, true, true)
            .empty());
  const std::string wide =
      kernel_refusal(KernelChoice{"auto", "default"}, Device::Host, DType::F32, 512, false, false);
  CHECK(wide.find("head_dim 512 exceeds kernel 'auto'") == 0);
  CHECK(wide.find("maximum 256") != std::string::npos);
  CHECK(kernel_refusal(KernelChoice{"auto", "big"}, Device::Host, DType::F32, 64, false, false)
            .find("'big'") != std::string::npos);
  CHECK(make_host_backend(KernelChoice{"materialized", "default"})->name() == "materialized");
  CHECK(make_host_backend(KernelChoice{"auto", "default"})->name() == "kokkos");
  CHECK(make_host_backend()->name() == "kokkos");
  CHECK_THROWS_AS(make_host_backend(KernelChoice{"flash", "default"}), std::invalid_argument);
}

TEST_CASE("mask partners enumerate exactly the allowed pairs") {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 400; ++trial) {
    Span other{0, 1 + static_cast<std::int64_t>(gen() % 40), static_cast<std::int64_t>(gen() % 50),
               1 + static_cast<std::int64_t>(gen() % 5)};
    Pattern pat;
    pat.causal = gen() % 2;
    if (gen() % 3) {
      pat.rate = 1 + gen() % 4;
      pat.segment = pat.rate * (1 + gen() % 6);
    }
    const int head = static_cast<int>(gen() % 6);
    const std::int64_t p = gen() % 220;
    for (bool keys : {true, false}) {
      const rb::attn::IndexRange r = rb::attn::partners(p, other, pat, head, keys);
      std::vector<std::int64_t> want, got;
      for (std::int64_t i = 0; i < other.count; ++i) {
        const std::int64_t o = other.position(i);
        if (keys ? pat.allows(p, o, head) : pat.allows(o, p, head)) want.push_back(i);
      }
      for (std::int64_t i = r.begin; i < r.end; i += r.step) got.push_back(i);
      REQUIRE(got == want);
      CHECK(r.count() == static_cast<std::int64_t>(want.size()));
    }
  }
}

TEST_CASE("storage dtypes round to nearest even") {
  using namespace rb::attn;
  CHECK(bf16_to_float(float_to_bf16(1.0f)) == 1.0f);
  CHECK(float_to_bf16(1.0f + 1.0f / 256) == 0x3f80);  // tie -> even (down)
  CHECK(float_to_bf16(1.0f + 3.0f / 256) == 0x3f82);  // tie -> even (up)
  CHECK(half_to_float(float_to_half(1.0f)) == 1.0f);
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(70000.0f) == 0x7c00);
  CHECK(half_to_float(float_to_half(5.9604645e-8f)) == 5.9604645e-8f);  // smallest subnormal
  CHECK(float_to_half(1.0f + 1.0f / 2048) == 0x3c00);                   // tie -> even
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-4, 4);
  for (int i = 0; i < 1000; ++i) {
    const float x = u(gen);
    CHECK(std::abs(round_to_storage(x, DType::F16) - x) <= std::abs(x) * (1.0f / 2048) * 1.0001f);
    CHECK(std::abs(round_to_storage(x, DType::BF16) - x) <= std::abs(x) * (1.0f / 256) * 1.0001f);
  }
}

TEST_CASE("pair counts match a brute-force count, and causal zigzag balances the work") {
  rb::ring::Problem p = rbtest::problem(3, 48, 3, 4, rb::ring::Layout::Contiguous, false);
  p.batch = 2;
  for (auto layout :
       {rb::ring::Layout::Contiguous, rb::ring::Layout::Zigzag, rb::ring::Layout::Striped})
    for (bool causal : {false, true})
      for (int dil = 0; dil < 2; ++dil) {
        p.layout = layout;
        p.causal = causal;
        p.branches.clear();
        if (dil) p.branches = {{12, 2}, {24, 3}};
        for (int r = 0; r < p.ring_size; ++r)
          for (int o = 0; o < p.ring_size; ++o) {
            const auto qp = rb::ring::local_positions(p, r), kp = rb::ring::local_positions(p, o);
            std::int64_t brute = 0;
            for (const Pattern& pat : p.patterns())
              for (int h = 0; h < p.heads; ++h)
                for (auto a : qp)
                  for (auto c : kp) brute += pat.allows(a, c, h);
            CHECK(rb::ring::pair_count(p, r, o) == brute * p.batch);
          }
      }
  p.branches.clear();
  p.causal = true;
  p.layout = rb::ring::Layout::Zigzag;
  std::int64_t lo = INT64_MAX, hi = 0;
  for (int r = 0; r < 3; ++r) {
    std::int64_t t = 0;
    for (auto x : rb::ring::step_pairs(p, r)) t += x;
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  CHECK(lo == hi);  // zigzag: every rank does the same causal work
  p.layout = rb::ring::Layout::Contiguous;
  const auto last = rb::ring::step_pairs(p, 2), first = rb::ring::step_pairs(p, 0);
  CHECK(first[1] == 0);  // rank 0 never attends to rank 2's later block
  CHECK(last[0] > first[0] - 1);
}

TEST_CASE("impossible problems are rejected with the numbers") {
  rb::ring::Problem p;
  p.seq_len = 100;
  p.ring_size = 3;
  CHECK(rb::ring::problem_error(p) ==
        "sequence length must be divisible by the ring size: 100 % 3 = 1");
  p.ring_size = 4;
  p.layout = rb::ring::Layout::Zigzag;
  CHECK(rb::ring::problem_error(p).find("100 % 8 = 4") != std::string::npos);
  p.layout = rb::ring::Layout::Contiguous;
  CHECK(rb::ring::problem_error(p).empty());
  p.branches = {{25, 50}};
  CHECK(rb::ring::problem_error(p) ==
        "branch 0: dilation rate 50 is larger than segment length 25");
  p.branches = {{25, 1}, {20, 3}};
  CHECK(rb::ring::problem_error(p) ==
        "branch 1: segment length must be divisible by its dilation rate: 20 % 3 = 2");
  p.branches = {{40, 2}};
  CHECK(rb::ring::problem_error(p) ==
        "branch 0: sequence length must be divisible by the segment length: 100 % 40 = 20");
  p.branches = {{200, 2}};
  CHECK(rb::ring::problem_error(p) ==
        "branch 0: segment length 200 is longer than the sequence length 100");
  CHECK_THROWS_AS(rb::ring::check_problem(p), std::invalid_argument);
}

TEST_CASE("parity check catches a wrong element, a NaN, and a gradient off by a little") {
  rb::ring::Problem p = rbtest::problem(1, 32, 2, 8, rb::ring::Layout::Contiguous, true);
  p.branches = {{16, 2}, {32, 1}};
  const rbtest::CaseResult ok = rbtest::run_case(p, 9, MPI_COMM_SELF, true);
  CHECK(ok.parity.out.max_rel < 1e-5);
  CHECK(ok.parity.dv.max_rel < 1e-5);
  rb::ring::RingResult bad = ok.result;
  bad.out[37] += 1e-3f;
  bad.dk[11] = std::numeric_limits<float>::quiet_NaN();
  const auto rep = rb::ring::check_parity(p, 9, 0, MPI_COMM_SELF, bad, true);
  CHECK(rep.out.max_abs == doctest::Approx(1e-3).epsilon(1e-2));
  CHECK(std::isinf(rep.dk.max_rel));
  CHECK(rep.dq.max_rel < 1e-5);
}

TEST_CASE("parity sampling at large sizes: sampled heads and rows, dK/dV skipped past the budget") {
  rb::ring::Problem p = rbtest::problem(1, 64, 3, 8, rb::ring::Layout::Contiguous, false);
  p.batch = 2;
  const rbtest::CaseResult c = rbtest::run_case(p, 4, MPI_COMM_SELF, true);
  rb::ring::ParityOptions opt;
  opt.full_budget = 1;  // pretend the point is large
  opt.sample_rows = 5;
  auto rep = rb::ring::check_parity(p, 4, 0, MPI_COMM_SELF, c.result, true, opt);
  CHECK(rep.sampled);
  CHECK(rep.out.compared == 2 * 64 * 8);  // heads (0,0) and (1,2), every row
  CHECK(rep.dq.compared == 2 * 5 * 8);
  CHECK(rep.dk.compared == 2 * 5 * 8);
  CHECK(rep.dk.max_rel < 1e-5);
  opt.dkv_budget = 1;  // and too large for the full forward of the sampled heads
  rep = rb::ring::check_parity(p, 4, 0, MPI_COMM_SELF, c.result, true, opt);
  CHECK(rep.out.compared == 2 * 5 * 8);
  CHECK(rep.lse.compared == 2 * 5);
  CHECK(rep.lse.max_abs < 1e-5);
  CHECK(rep.dk.compared == 2 * 5 * 8);  // with the ring's own normaliser
  CHECK(rep.dk.max_rel < 1e-5);
  CHECK(rep.dv.max_rel < 1e-5);
  CHECK(rep.note.find("ring's own log-sum-exp") != std::string::npos);
  CHECK(rep.dq.max_rel < 1e-5);
  // A wrong dK is still caught in that mode.
  rb::ring::RingResult bad = c.result;
  bad.dk[3] += 0.01f;  // row 0 of head (0,0), a sampled row
  rep = rb::ring::check_parity(p, 4, 0, MPI_COMM_SELF, bad, true, opt);
  CHECK(rep.dk.max_abs == doctest::Approx(0.01).epsilon(1e-2));
}
