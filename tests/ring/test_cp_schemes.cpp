// The all-gather, Ulysses and hybrid schemes (ring/cp_attention.hpp) at the world's size (1-4
// ranks; host path, and GPU path in test_cp_schemes_gpu) against the single-rank double-precision
// reference, on the same shards the ring starts from and ends with: every layout, causal or not,
// dilated branches where the scheme allows them, fp32 and bf16 storage, forward and backward; the
// bytes each rank sends; and Ulysses' refusals.
#include <doctest/doctest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "ring/cp_attention.hpp"
#include "ring/ulysses_attention.hpp"
#include "ring_case.hpp"
#include "test_support.hpp"

using rb::ring::Branch;
using rb::ring::Layout;
using rb::ring::Problem;
using rb::ring::Scheme;

namespace {

double worst(double e) {
  double w = 0;
  MPI_Allreduce(&e, &w, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return w;
}

void check_scheme(const Problem& p, Scheme scheme, int ulysses_degree = 1, int head_groups = 1) {
  CAPTURE(rbtest::describe(p));
  CAPTURE(rb::ring::to_string(scheme));
  CAPTURE(ulysses_degree);
  CAPTURE(head_groups);
  const rbtest::CaseResult c =
      rbtest::run_case(p, 77, MPI_COMM_WORLD, true, {}, scheme, ulysses_degree, head_groups);
  // Ulysses and hybrid send O, dQ, dK, dV back in the input dtype (ring/head_exchange.hpp): one
  // rounding to it, up to one unit of its last place (bf16 2^-8, fp16 2^-11) of the largest value.
  double tol = rbtest::tolerance(p.dtype);
  if (scheme == Scheme::Ulysses || scheme == Scheme::Hybrid)
    tol += p.dtype == rb::attn::DType::BF16  ? 0x1p-8
           : p.dtype == rb::attn::DType::F16 ? 0x1p-11
                                             : 0.0;
  CHECK(worst(c.parity.out.max_rel) < tol);
  CHECK(worst(c.parity.dq.max_rel) < tol);
  CHECK(worst(c.parity.dk.max_rel) < tol);
  CHECK(worst(c.parity.dv.max_rel) < tol);
  CHECK(c.parity.out.compared == p.shard_elements());    // every element of this rank's rows
  CHECK(c.parity.dv.compared == p.kv_shard_elements());  // K/V heads: num_kv_heads
}

// Heads divisible by every world size the test runs at (1-4) and, per rank, by rate 2.
Problem base(Layout layout, bool causal) {
  const int R = rb::test::world();
  return rbtest::problem(R, R == 3 ? 48 : 64, 24, 8, layout, causal);  // 24 heads: 2 | 24 / R
}

}  // namespace

TEST_CASE("all-gather and Ulysses equal the reference: every layout, causal or not, dilated") {
  if (!rbtest::path_usable()) return;
  for (Layout layout : {Layout::Contiguous, Layout::Zigzag, Layout::Striped})
    for (bool causal : {false, true})
      for (const std::vector<Branch>& branches :
           std::vector<std::vector<Branch>>{{}, {{16, 2}, {32, 1}}}) {
        Problem p = base(layout, causal);
        p.branches = branches;
        if (!rb::ring::problem_error(p).empty()) continue;
        check_scheme(p, Scheme::AllGather);
        REQUIRE(rb::ring::ulysses_problem_error(p).empty());
        check_scheme(p, Scheme::Ulysses);
      }
}

TEST_CASE(
    "grouped-query attention (num_kv_heads < num_heads) under every scheme, full and sampled") {
  if (!rbtest::path_usable()) return;
  const int R = rb::test::world();
  for (Layout layout : {Layout::Zigzag, Layout::Striped})
    for (int kv : {12, 1}) {  // GQA (2 query heads per K/V head), MQA (one K/V head)
      Problem p = base(layout, true);
      p.kv_heads = kv;
      p.branches = {{16, 2}, {p.seq_len, 1}};
      check_scheme(p, Scheme::Ring);
      check_scheme(p, Scheme::AllGather);
      if (kv % R == 0)
        check_scheme(p, Scheme::Ulysses);
      else
        CHECK(rb::ring::ulysses_problem_error(p).find(
                  "num_kv_heads 1 is not divisible by the group size") == 0);
    }
  // The sampled check compares each K/V head's gradient with its whole group's sum.
  Problem p = base(Layout::Zigzag, true);
  p.kv_heads = 12;  // 2 query heads per K/V head, 12 divisible by every world size 1-4
  rb::ring::ParityOptions sampled;
  sampled.mode = rb::ring::ParityMode::Sampled;
  sampled.sample_rows = 4;
  for (Scheme s : {Scheme::Ring, Scheme::AllGather, Scheme::Ulysses}) {
    CAPTURE(rb::ring::to_string(s));
    const rbtest::CaseResult c = rbtest::run_case(p, 3, MPI_COMM_WORLD, true, sampled, s);
    CHECK(c.parity.sampled);
    CHECK(c.parity.note.find("each with the 2 heads of its K/V group") != std::string::npos);
    CHECK(worst(c.parity.dk.max_rel) < rbtest::tolerance(p.dtype));
    CHECK(worst(c.parity.dv.max_rel) < rbtest::tolerance(p.dtype));
    CHECK(c.parity.dk.compared > 0);
  }
}

TEST_CASE("a K/V head's gradient is its group's sum: a wrong K/V head mapping fails parity") {
  if (!rbtest::path_usable()) return;
  // Computing the problem as if every query head had its own K/V head (kv_heads = heads) while
  // the reference groups them must fail: the check is sensitive to the grouping.
  Problem gqa = base(Layout::Contiguous, false);
  gqa.kv_heads = 12;
  const rbtest::CaseResult c = rbtest::run_case(gqa, 9, MPI_COMM_WORLD, true, {}, Scheme::Ring);
  Problem ungrouped = gqa;
  ungrouped.kv_heads = 0;
  const rb::ring::RingResult wrong =
      rbtest::run_ring(ungrouped, 9, MPI_COMM_WORLD, true, Scheme::Ring);
  rb::ring::RingResult mixed = c.result;
  mixed.out = wrong.out;  // O from K/V heads that are not the group's
  const rb::ring::ParityReport bad =
      rb::ring::check_parity(gqa, 9, rb::test::rank(), MPI_COMM_WORLD, mixed, true, {});
  CHECK(worst(c.parity.out.max_rel) < rbtest::tolerance(gqa.dtype));
  CHECK(worst(bad.out.max_rel) > 0.01);
}

TEST_CASE(
    "hybrid: Ulysses inside subgroups, the ring across, at every degree that divides the group") {
  if (!rbtest::path_usable()) return;
  const int R = rb::test::world();
  for (int u = 1; u <= R; ++u) {
    if (R % u != 0) continue;
    for (Layout layout : {Layout::Contiguous, Layout::Zigzag})
      for (bool causal : {false, true}) {
        Problem p = base(layout, causal);
        p.branches = {{16, 2}, {p.seq_len, 1}};
        REQUIRE(rb::ring::hybrid_problem_error(p, u).empty());
        check_scheme(p, Scheme::Hybrid, u);
        p.kv_heads = 12;  // GQA: 12 K/V heads split like the 24 query heads
        check_scheme(p, Scheme::Hybrid, u);
      }
  }
}

TEST_CASE("hybrid refuses what it cannot split") {
  Problem p = rbtest::problem(4, 64, 8, 8, Layout::Striped, true);
  CHECK(rb::ring::hybrid_problem_error(p, 2).find(
            "the striped layout of 4 ranks does not split into 2 subgroups") == 0);
  CHECK(rb::ring::hybrid_problem_error(p, 4).empty());  // one subgroup: it holds every row
  CHECK(rb::ring::hybrid_problem_error(p, 1).empty());  // the ring itself
  p.layout = Layout::Zigzag;
  CHECK(rb::ring::hybrid_problem_error(p, 3).find(
            "ulysses_degree 3 does not divide the ring size 4") == 0);
  p.heads = 6;
  CHECK(rb::ring::hybrid_problem_error(p, 4).find(
            "num_heads 6 is not divisible by ulysses_degree 4") == 0);
  p.heads = 8;
  p.kv_heads = 2;
  CHECK(rb::ring::hybrid_problem_error(p, 4).find("num_kv_heads 2 is not divisible") == 0);
}

TEST_CASE("all-gather and Ulysses with bf16 storage, batch 2") {
  if (!rbtest::path_usable()) return;
  Problem p = base(Layout::Zigzag, true);
  p.batch = 2;
  p.dtype = rb::attn::DType::BF16;
  check_scheme(p, Scheme::AllGather);
  check_scheme(p, Scheme::Ulysses);
  if (rb::test::world() % 2 == 0) check_scheme(p, Scheme::Hybrid, 2);
}

TEST_CASE("every scheme sends the bytes bytes_sent_per_iteration says") {
  if (!rbtest::path_usable()) return;
  const Problem p = base(Layout::Zigzag, true);
  const int u =
      rb::test::world() % 2 == 0 ? 2 : 1;  // hybrid: subgroups of 2 where the world splits so
  for (Scheme s : {Scheme::Ring, Scheme::AllGather, Scheme::Ulysses, Scheme::Hybrid}) {
    CAPTURE(rb::ring::to_string(s));
    rbtest::RingSetup setup(p, MPI_COMM_WORLD, true, s, u);
    const auto q = rb::ring::make_shard(p, rb::test::rank(), 5, rb::ring::Tensor::Q);
    setup.ring->load_inputs(q.data(), q.data(), q.data(), q.data());
    setup.ring->forward();
    setup.ring->backward();
    CHECK(setup.ring->bytes_sent() == rb::ring::bytes_sent_per_iteration(p, s, true, u));
    CHECK(setup.ring->scheme() == s);
  }
}

TEST_CASE(
    "Ulysses in head groups: each group's all-to-all overlapped, the same O, LSE, gradients") {
  if (!rbtest::path_usable()) return;
  // 24 heads: per rank 24 / R (24, 12, 8, 6), in 2 groups; with 12 K/V heads (GQA, 2 query
  // heads each) wherever a rank's K/V heads split in 2; dilated rate 2 where a group's heads
  // stay even.
  const int R = rb::test::world();
  for (Layout layout : {Layout::Zigzag, Layout::Striped, Layout::Contiguous}) {
    Problem p = base(layout, layout != Layout::Contiguous);
    check_scheme(p, Scheme::Ulysses, 1, 2);
    if ((12 / R) % 2 == 0) {
      p.kv_heads = 12;
      check_scheme(p, Scheme::Ulysses, 1, 2);
      p.kv_heads = 0;
    }
    p.branches = {{16, 2}, {p.seq_len, 1}};
    if ((24 / R / 2) % 2 == 0 && rb::ring::problem_error(p).empty())
      check_scheme(p, Scheme::Ulysses, 1, 2);
  }
  Problem b = base(Layout::Zigzag, true);  // bf16, batch 2: the groups' strided heads per batch
  b.batch = 2;
  b.dtype = rb::attn::DType::BF16;
  check_scheme(b, Scheme::Ulysses, 1, 2);
  if ((24 / R) % 3 == 0) check_scheme(b, Scheme::Ulysses, 1, 3);
}

TEST_CASE("Ulysses head groups send the same bytes as one exchange, and keep their times") {
  if (!rbtest::path_usable()) return;
  const Problem p = base(Layout::Zigzag, true);
  rbtest::RingSetup setup(p, MPI_COMM_WORLD, true, Scheme::Ulysses, 1, 2);
  const auto q = rb::ring::make_shard(p, rb::test::rank(), 5, rb::ring::Tensor::Q);
  setup.ring->load_inputs(q.data(), q.data(), q.data(), q.data());
  setup.ring->forward();
  setup.ring->backward();
  CHECK(setup.ring->bytes_sent() ==
        rb::ring::bytes_sent_per_iteration(p, Scheme::Ulysses, true, 1));
  const rb::ring::StepTimes& f = setup.ring->forward_steps();
  CHECK(f.compute[0] > 0.0);
  CHECK(f.wait[0] >= 0.0);
}

// Issue #27: Ulysses' all-to-alls by the copy engines (transport: copy_engine), one exchange
// and head groups, against the reference; then three passes on one transport (warm-up and
// timed iterations reuse it: each pass must wait for the peers' pulls of the last). GPU path
// only: the host path has no copy engines.
TEST_CASE("Ulysses over the copy engines equals the reference, over repeated passes") {
  if (!rbtest::path_usable() || rbtest::kPath == rb::Backend::Host) return;
  const int R = rb::test::world();
  if (R > 1 && !rbtest::paths().copy_engine_probe(MPI_COMM_WORLD, true).usable) {
    MESSAGE("copy engines not usable here");
    return;
  }
  rbtest::use_copy_engine() = true;
  for (Layout layout : {Layout::Contiguous, Layout::Zigzag})
    for (int groups : {1, 2})
      check_scheme(base(layout, layout == Layout::Zigzag), Scheme::Ulysses, 1, groups);
  Problem p = base(Layout::Zigzag, true);
  p.dtype = rb::attn::DType::BF16;
  p.batch = 2;
  check_scheme(p, Scheme::Ulysses, 1, (24 / R) % 4 == 0 ? 4 : 2);
  {
    rbtest::RingSetup setup(p, MPI_COMM_WORLD, true, Scheme::Ulysses, 1, 2);
    CHECK(setup.group->name() == "copy_engine");
    const rb::ring::ParityReport par = rbtest::repeated_passes(p, 4, setup, MPI_COMM_WORLD);
    const double tol = rbtest::tolerance(p.dtype) + 0x1p-8;
    CHECK(worst(par.out.max_rel) < tol);
    CHECK(worst(par.dq.max_rel) < tol);
    CHECK(worst(par.dk.max_rel) < tol);
    CHECK(worst(par.dv.max_rel) < tol);
  }
  rbtest::use_copy_engine() = false;
}

TEST_CASE("Ulysses head groups that do not divide a rank's heads are refused, with the numbers") {
  Problem p = rbtest::problem(4, 64, 8, 8, Layout::Contiguous, false);  // 2 heads per rank
  CHECK(rb::ring::ulysses_head_groups_error(p, 2).empty());
  CHECK(rb::ring::ulysses_head_groups_error(p, 4).find(
            "ulysses_head_groups 4 does not divide the 2 heads and 2 K/V heads per rank") == 0);
  p.heads = 16;
  p.kv_heads = 4;  // 1 K/V head per rank
  CHECK(rb::ring::ulysses_head_groups_error(p, 2).find("does not divide the 4 heads and 1 K/V") !=
        std::string::npos);
  p.kv_heads = 0;
  p.branches = {{32, 4}};  // 4 heads per rank, 2 per group: rate 4 cannot keep its offset
  CHECK(rb::ring::ulysses_head_groups_error(p, 2).find(
            "dilation rate 4 does not divide the 2 heads of a head group") == 0);
  CHECK(rb::ring::ulysses_head_groups_error(p, 1).empty());
  CHECK(rb::ring::ulysses_head_groups_error(p, 0).find("outside 1 .. 32") != std::string::npos);
}

TEST_CASE("Ulysses refuses heads the group cannot split, and rates the local heads cannot keep") {
  Problem p = rbtest::problem(4, 64, 6, 8, Layout::Contiguous, false);
  CHECK(rb::ring::ulysses_problem_error(p).find(
            "num_heads 6 is not divisible by the group size 4") == 0);
  p.heads = 8;
  p.branches = {{32, 4}};
  CHECK(rb::ring::ulysses_problem_error(p).find(
            "dilation rate 4 does not divide the 2 heads per rank") == 0);
  p.branches = {{32, 2}};
  CHECK(rb::ring::ulysses_problem_error(p).empty());
}

TEST_CASE("position runs: zigzag chunks whole, striped rows one by one") {
  const Problem z = rbtest::problem(2, 16, 1, 4, Layout::Zigzag, true);
  const auto runs = rb::ring::position_runs(z, 1);  // chunks 1 and 2 of 4: positions 4-7, 8-11
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].row == 0);
  CHECK(runs[0].joint == 4);
  CHECK(runs[1].row == 4);
  CHECK(runs[1].joint == 8);
  CHECK(runs[1].count == 4);
  const Problem s = rbtest::problem(2, 16, 1, 4, Layout::Striped, true);
  const auto rows = rb::ring::position_runs(s, 1);
  REQUIRE(rows.size() == 8);
  CHECK(rows[3].joint == 7);
  CHECK(rows[3].count == 1);
}
