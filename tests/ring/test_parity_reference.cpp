// The parity check's two references (run under mpiexec with 1-4 ranks, one ring of the world):
// the streamed reference, whose blocks travel around the ring, gives the full-sequence
// reference's values on every row (forward, dQ, dK, dV; every layout, causal, dilated); its
// memory is O(S/R) where the full one's is O(S); validate.reference's modes compare what they
// say; a wrong element on any rank is caught in sampled mode.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "ring/head_reference.hpp"
#include "ring_case.hpp"
#include "test_support.hpp"

using rb::ring::Branch;
using rb::ring::Layout;
using rb::ring::ParityMode;
using rb::ring::Problem;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

double worst(double e) {
  double w = 0;
  MPI_Allreduce(&e, &w, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return w;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) && std::isinf(b[i]) && (a[i] < 0) == (b[i] < 0)) continue;
    m = std::max(m, std::abs(a[i] - b[i]));
  }
  return m;
}

// Every value of both references on every local row of every head, the largest difference.
double compare_references(const Problem& p, std::uint64_t seed) {
  const int rank = world_rank();
  auto full = rb::ring::make_full_reference(p, seed, rank, MPI_COMM_WORLD);
  auto streamed = rb::ring::make_streamed_reference(p, seed, rank, MPI_COMM_WORLD);
  const std::int64_t n = p.local_rows();
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) rows[static_cast<std::size_t>(i)] = i;
  double m = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h) {
      full->load_head(b, h);
      streamed->load_head(b, h);
      std::vector<double> o1, l1, o2, l2, g1, g2, k1, k2, v1, v2;
      full->forward(rows, o1, l1);
      streamed->forward(rows, o2, l2);
      m = std::max({m, max_diff(o1, o2), max_diff(l1, l2)});
      std::vector<double> delta(rows.size());
      for (std::size_t i = 0; i < rows.size(); ++i) {
        delta[i] = full->delta(rows[i], &o1[i * static_cast<std::size_t>(p.head_dim)]);
        m = std::max(
            m, std::abs(delta[i] -
                        streamed->delta(rows[i], &o1[i * static_cast<std::size_t>(p.head_dim)])));
      }
      full->dq(rows, l1, delta, g1);
      streamed->dq(rows, l1, delta, g2);
      full->dkv(rows, l1, delta, k1, v1);
      streamed->dkv(rows, l1, delta, k2, v2);
      m = std::max({m, max_diff(g1, g2), max_diff(k1, k2), max_diff(v1, v2)});
    }
  return worst(m);
}

Problem make(std::int64_t S, Layout layout, bool causal, std::vector<Branch> branches = {}) {
  Problem p = rbtest::problem(rb::test::world(), S, 2, 8, layout, causal);
  p.branches = std::move(branches);
  return p;
}

}  // namespace

TEST_CASE("streamed reference equals the full-sequence reference on every row") {
  const int R = rb::test::world();
  const std::int64_t S = 24 * R;  // divisible by 2R (zigzag) and by the segments below
  for (Layout layout : {Layout::Contiguous, Layout::Zigzag, Layout::Striped})
    for (bool causal : {false, true}) {
      const Problem p = make(S, layout, causal);
      CAPTURE(rbtest::describe(p));
      CHECK(compare_references(p, 11) < 1e-12);
    }
  // Dilated (LongNet), two branches (a key both allow counts twice); under zigzag the 48-row
  // segments span two chunks of 24 that different ranks hold.
  const Problem d = make(2 * S, Layout::Zigzag, true, {{12, 2}, {48, 3}});
  CAPTURE(rbtest::describe(d));
  CHECK(compare_references(d, 5) < 1e-12);
}

TEST_CASE("memory: streamed O(S/R) per rank, full O(S)") {
  const int R = rb::test::world(), rank = world_rank();
  const Problem p = make(64 * R, Layout::Zigzag, true);
  const rbtest::CaseResult c = rbtest::run_case(p, 3, MPI_COMM_WORLD, true);
  rb::ring::ParityOptions opt;
  opt.mode = ParityMode::Sampled;
  const auto sampled = rb::ring::check_parity(p, 3, rank, MPI_COMM_WORLD, c.result, true, opt);
  opt.mode = ParityMode::Full;
  const auto full = rb::ring::check_parity(p, 3, rank, MPI_COMM_WORLD, c.result, true, opt);
  const std::int64_t n = p.local_rows(), d = p.head_dim, S = p.seq_len;
  // Full: Q, K, V, dO of the whole head as float, and lse/delta at every position.
  CHECK(full.reference_bytes >= 16 * S * d);
  // Streamed: one block of two tensors (float) and two per-row doubles, the positions, and
  // the check's per-row normalisers and results (every local row at most here): no term in S.
  const std::int64_t bound = (8 * n * d + 16 * n) + 16 * n + 8 * (4 * n + 4 * n * d);
  CHECK(sampled.reference_bytes <= bound);
  CHECK(sampled.reference_bytes > 0);
  if (R > 1) CHECK(sampled.reference_bytes < full.reference_bytes);
}

TEST_CASE("validate.reference modes: what each compares, and errors caught on any rank") {
  const int R = rb::test::world(), rank = world_rank();
  Problem p = make(48 * R, Layout::Striped, true, {});
  p.batch = 2;
  const rbtest::CaseResult c = rbtest::run_case(p, 7, MPI_COMM_WORLD, true);
  rb::ring::ParityOptions opt;
  CHECK(rb::ring::resolve_parity_mode(p, opt) == ParityMode::Full);  // small: auto is full
  opt.full_budget = 1;
  CHECK(rb::ring::resolve_parity_mode(p, opt) == ParityMode::Sampled);
  opt.sample_rows = 4;
  opt.dkv_budget = 1;  // gradients with the ring's own normaliser
  auto rep = rb::ring::check_parity(p, 7, rank, MPI_COMM_WORLD, c.result, true, opt);
  CHECK(rep.mode == ParityMode::Sampled);
  CHECK(rep.sampled);
  CHECK(rep.out.compared == 2 * 4 * 8);  // heads (0,0) and (1,1), 4 rows each
  CHECK(rep.dk.compared == 2 * 4 * 8);
  CHECK(worst(std::max({rep.out.max_rel, rep.dq.max_rel, rep.dk.max_rel, rep.dv.max_rel})) < 1e-5);
  CHECK(rep.note.find("streamed") != std::string::npos);
  // The last rank's dV is wrong in its last row (a sampled row) of head (1,1).
  rb::ring::RingResult bad = c.result;
  if (rank == R - 1) bad.dv[bad.dv.size() - 1] += 0.05f;
  rep = rb::ring::check_parity(p, 7, rank, MPI_COMM_WORLD, bad, true, opt);
  CHECK(worst(rep.dv.max_abs) == doctest::Approx(0.05).epsilon(1e-2));
  CHECK(worst(rep.dk.max_abs) < 1e-5);
  // full: every element; off is not a check.
  opt.mode = ParityMode::Full;
  rep = rb::ring::check_parity(p, 7, rank, MPI_COMM_WORLD, c.result, true, opt);
  CHECK_FALSE(rep.sampled);
  CHECK(rep.out.compared == p.shard_elements());
  CHECK(rep.dv.compared == p.shard_elements());
  opt.mode = ParityMode::Off;
  CHECK_THROWS_AS(rb::ring::check_parity(p, 7, rank, MPI_COMM_WORLD, c.result, true, opt),
                  std::invalid_argument);
  CHECK(rb::ring::parity_mode_from_string("sampled") == ParityMode::Sampled);
  // sample_rows auto: at least 256 rows per ring, 2 to 32 per rank.
  rb::ring::ParityOptions automatic;
  for (auto [ring, rows] : {std::pair{1, 32}, {8, 32}, {16, 16}, {24, 11}, {128, 2}, {1024, 2}}) {
    Problem q = p;
    q.ring_size = ring;
    CHECK(rb::ring::sampled_rows_per_rank(q, automatic) == rows);
  }
  automatic.sample_rows = 5;
  CHECK(rb::ring::sampled_rows_per_rank(p, automatic) == 5);
  CHECK_THROWS_AS(rb::ring::parity_mode_from_string("partial"), std::invalid_argument);
}
