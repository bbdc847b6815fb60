// The ring algorithm at the world's size (run under mpiexec with 1, 2, 3 and 4 ranks) against
// the single-rank double-precision reference: every layout, causal and not, several dilation
// combinations (segments spanning ranks included), forward and backward; a finite-difference
// check of the gradients; and concurrent rings when the ring is smaller than the world.
// Built twice from this file: on the host path (test_ring_mpi) and, in CUDA builds, on the
// GPU path with the NCCL transport (test_ring_mpi_gpu, label gpu; see ring_case.hpp).
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ring/transport_choice.hpp"
#include "ring_case.hpp"
#include "test_support.hpp"

using rb::ring::Branch;
using rb::ring::Layout;
using rb::ring::Problem;

namespace {

// Worst error over every rank of `comm`.
double worst(double e, MPI_Comm comm) {
  double w = 0;
  MPI_Allreduce(&e, &w, 1, MPI_DOUBLE, MPI_MAX, comm);
  return w;
}

void check_case(const Problem& p, std::uint64_t seed, MPI_Comm ring) {
  CAPTURE(rbtest::describe(p));
  const double tol = rbtest::tolerance(p.dtype);
  const rbtest::CaseResult c = rbtest::run_case(p, seed, ring, true);
  // Errors are collective: every rank of the ring reports the same verdict.
  CHECK(worst(c.parity.out.max_rel, ring) < tol);
  CHECK(worst(c.parity.dq.max_rel, ring) < tol);
  CHECK(worst(c.parity.dk.max_rel, ring) < tol);
  CHECK(worst(c.parity.dv.max_rel, ring) < tol);
  CHECK(c.parity.out.compared == p.shard_elements());  // small: every element checked
  CHECK(c.parity.dk.compared == p.shard_elements());
  CHECK_FALSE(c.parity.sampled);
}

// Dilation sets scaled to S: none, one dilated branch, LongNet's mix of three, and one whose
// segment (S/2) spans ranks for R >= 3 and a rate that does not divide the rank's row count.
std::vector<std::vector<Branch>> dilation_sets(std::int64_t S) {
  return {{}, {{S / 2, 2}}, {{S / 4, 1}, {S / 2, 2}, {S, 4}}, {{S / 2, 4}, {S / 4, 2}}};
}

}  // namespace

TEST_CASE("ring equals the reference: every layout, causal or not, dilation combinations") {
  if (!rbtest::path_usable()) return;
  const int R = rb::test::world();
  const std::int64_t S = R == 3 ? 48 : 64;  // divisible by 2R and by every segment below
  for (Layout layout : {Layout::Contiguous, Layout::Zigzag, Layout::Striped})
    for (bool causal : {false, true})
      for (const auto& branches : dilation_sets(S)) {
        Problem p = rbtest::problem(R, S, 3, 8, layout, causal);
        p.batch = 2;
        p.branches = branches;
        check_case(p, 11, MPI_COMM_WORLD);
      }
}

TEST_CASE("segments spanning ranks: S=64, w=32 (S=96, w=48 at R=3) at every ring size") {
  if (!rbtest::path_usable()) return;
  const int R = rb::test::world();
  const std::int64_t S = R == 3 ? 96 : 64;
  for (Layout layout : {Layout::Contiguous, Layout::Zigzag, Layout::Striped}) {
    Problem p = rbtest::problem(R, S, 4, 16, layout, layout != Layout::Contiguous);
    p.branches = {{S / 2, 1}, {S / 2, 4}, {S, 8}};
    check_case(p, 5, MPI_COMM_WORLD);
  }
}

TEST_CASE("bf16 and fp16 storage match the reference on the rounded inputs") {
  if (!rbtest::path_usable()) return;
  const int R = rb::test::world();
  for (auto dt : {rb::attn::DType::BF16, rb::attn::DType::F16}) {
    Problem p = rbtest::problem(R, 16 * R, 2, 16, Layout::Zigzag, true);
    p.dtype = dt;
    check_case(p, 3, MPI_COMM_WORLD);
  }
}

TEST_CASE("finite differences of the ring forward agree with the ring backward") {
  if (!rbtest::path_usable()) return;
  const int R = rb::test::world(), rank = rb::test::rank();
  Problem p = rbtest::problem(R, 8 * R, 2, 8, Layout::Zigzag, true);
  p.branches = {{p.seq_len / 2, 2}, {p.seq_len, 1}};
  const std::uint64_t seed = 21;
  using rb::ring::Tensor;
  std::vector<std::vector<unsigned char>> in;
  for (Tensor t : {Tensor::Q, Tensor::K, Tensor::V, Tensor::dO})
    in.push_back(rb::ring::make_shard(p, rank, seed, t));
  rbtest::RingSetup setup(p, MPI_COMM_WORLD, true);
  rb::ring::ContextParallelAttention& ra = *setup.ring;
  const std::size_t n = static_cast<std::size_t>(p.shard_elements());
  std::vector<float> out(n), dq(n), dk(n), dv(n);
  // loss = sum over every rank of sum(O * dO), accumulated in double
  auto loss = [&]() {
    ra.load_inputs(in[0].data(), in[1].data(), in[2].data(), in[3].data());
    ra.forward();
    out = ra.result().out;
    const float* g = reinterpret_cast<const float*>(in[3].data());
    double l = 0;
    for (std::size_t i = 0; i < n; ++i) l += double(out[i]) * g[i];
    double total = 0;
    MPI_Allreduce(&l, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return total;
  };
  loss();
  ra.backward();
  const rb::ring::RingResult grads_now = ra.result();
  dq = grads_now.dq;
  dk = grads_now.dk;
  dv = grads_now.dv;
  // Perturb one element of Q, K and V, each on a different ring rank (dK/dV must have
  // travelled home to be right), at a row inside the second zigzag chunk.
  const std::size_t elem =
      (static_cast<std::size_t>(p.local_rows()) * p.heads - 3) * p.head_dim + 5;
  const float eps = 1e-2f;
  const int owners[3] = {0, R - 1, R > 1 ? 1 : 0};
  const std::vector<float>* grads[3] = {&dq, &dk, &dv};
  for (int t = 0; t < 3; ++t) {
    float* x = reinterpret_cast<float*>(in[static_cast<std::size_t>(t)].data());
    const float orig = x[elem];
    if (rank == owners[t]) x[elem] = orig + eps;
    const double up = loss();
    if (rank == owners[t]) x[elem] = orig - eps;
    const double down = loss();
    x[elem] = orig;
    const double fd = (up - down) / (2.0 * eps);
    double analytic = rank == owners[t] ? (*grads[t])[elem] : 0.0;
    double a = 0;
    MPI_Allreduce(&analytic, &a, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CAPTURE(t);
    CAPTURE(fd);
    CAPTURE(a);
    CHECK(std::abs(a) > 1e-4);  // a non-trivial gradient element
    CHECK(std::abs(fd - a) <= 2e-3 + 2e-2 * std::abs(a));
  }
}

TEST_CASE("ring size smaller than the world: independent concurrent rings") {
  if (!rbtest::path_usable()) return;
  const int world = rb::test::world(), rank = rb::test::rank();
  for (int R = 1; R <= world; ++R) {
    if (world % R != 0 || R == world) continue;
    MPI_Comm ring;
    MPI_Comm_split(MPI_COMM_WORLD, rank / R, rank % R, &ring);
    Problem p = rbtest::problem(R, 32, 2, 8, Layout::Zigzag, true);
    p.branches = {{16, 2}, {32, 1}};
    // Different rings get different data; each must match its own reference.
    check_case(p, 100 + static_cast<std::uint64_t>(rank / R), ring);
    MPI_Comm_free(&ring);
  }
}

// The copy-engine transport (issue #26): the same ring, its K/V pulled through CUDA IPC by the
// copy engines, against the reference; several passes per transport (warm-up and timed
// iterations reuse it) and hybrid's inner ring. The host path has no copy engines: its probe
// says so and the transport is refused.
TEST_CASE("copy-engine transport: the ring equals the reference over repeated passes") {
  if (!rbtest::path_usable()) return;
  const int R = rb::test::world();
  const rb::ring::CopyEngineProbe probe = rbtest::paths().copy_engine_probe(MPI_COMM_WORLD, true);
  if (rbtest::kPath == rb::Backend::Host) {
    CHECK_FALSE(probe.usable);
    CHECK(probe.why_not.find("MPI") != std::string::npos);
    return;
  }
  if (R > 1 && !probe.usable) {
    MESSAGE("copy engines not usable here: " << probe.why_not);
    return;
  }
  rbtest::use_copy_engine() = true;
  const std::int64_t S = R == 3 ? 48 : 64;
  for (Layout layout : {Layout::Contiguous, Layout::Zigzag})
    for (bool causal : {false, true}) {
      Problem p = rbtest::problem(R, S, 3, 16, layout, causal);
      p.branches = {{S / 2, 2}, {S, 1}};
      check_case(p, 21, MPI_COMM_WORLD);
    }
  Problem p = rbtest::problem(R, 16 * R, 2, 16, Layout::Zigzag, true);
  p.dtype = rb::attn::DType::BF16;
  {  // three passes on one transport, as warm-up and timed iterations make
    rbtest::RingSetup setup(p, MPI_COMM_WORLD, true);
    const rb::ring::ParityReport par = rbtest::repeated_passes(p, 4, setup, MPI_COMM_WORLD);
    CHECK(par.out.max_rel < rbtest::tolerance(p.dtype));
    CHECK(par.dk.max_rel < rbtest::tolerance(p.dtype));
    CHECK(setup.transport->name() == "copy_engine");
  }
  if (R % 2 == 0) {
    Problem h = rbtest::problem(R, 64, 4, 16, Layout::Zigzag, true);
    const rbtest::CaseResult c =
        rbtest::run_case(h, 8, MPI_COMM_WORLD, true, {}, rb::ring::Scheme::Hybrid, 2);
    CHECK(c.parity.out.max_rel < rbtest::tolerance(h.dtype));
    CHECK(c.parity.dv.max_rel < rbtest::tolerance(h.dtype));
  }
  rbtest::use_copy_engine() = false;
}

// A ring across nodes (issue #26): the copy engines on the hops inside a node, NCCL on the ones
// between nodes, here with nodes simulated as halves of the world (2 ranks: every hop crosses,
// the copy engines move nothing; 4: two hops of each kind). Over repeated passes, as warm-up
// and timed iterations reuse the transport, and against the reference.
TEST_CASE("mixed transport: copy engines inside simulated nodes, NCCL between them") {
  if (!rbtest::path_usable() || rbtest::kPath == rb::Backend::Host) return;
  const int R = rb::test::world(), rank = rb::test::rank();
  if (R < 2 || R % 2 != 0) return;
  std::vector<int> nodes(static_cast<std::size_t>(R));
  for (int r = 0; r < R; ++r) nodes[static_cast<std::size_t>(r)] = r / (R / 2);
  rb::ring::TransportFacts facts;
  facts.on_device = true;
  rb::ring::set_ring_nodes(facts, nodes, rank);
  if (!rbtest::paths().copy_engine_probe(MPI_COMM_WORLD, facts.links.in_local).usable) {
    MESSAGE("copy engines not usable here");
    return;
  }
  rbtest::use_copy_engine() = true;
  rbtest::copy_engine_links() = facts.links;
  for (bool causal : {false, true}) {
    Problem p = rbtest::problem(R, 16 * R, 2, 16, Layout::Zigzag, causal);
    p.dtype = rb::attn::DType::BF16;
    rbtest::RingSetup setup(p, MPI_COMM_WORLD, true);
    CHECK(setup.transport->name() == "copy_engine+nccl");
    const rb::ring::ParityReport par = rbtest::repeated_passes(p, 4, setup, MPI_COMM_WORLD);
    CHECK(par.out.max_rel < rbtest::tolerance(p.dtype));
    CHECK(par.dq.max_rel < rbtest::tolerance(p.dtype));
    CHECK(par.dk.max_rel < rbtest::tolerance(p.dtype));
    CHECK(par.dv.max_rel < rbtest::tolerance(p.dtype));
  }
  rbtest::copy_engine_links() = {};
  rbtest::use_copy_engine() = false;
}
