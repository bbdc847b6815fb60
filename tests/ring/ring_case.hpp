#pragma once
// Runs the ring algorithm (not the sweep) for one problem on a ring communicator and checks it
// against the double-precision reference; shared by the ring tests. The path under test comes
// from the program's own path factories: the host path (Kokkos kernels, MPI transport) in the
// host test executables, the GPU path (CUDA kernels, NCCL transport) in the ones linked with
// the GPU test main (RINGBENCH_GPU_TESTS), so the same test bodies cover both.
#include <mpi.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/paths.hpp"
#include "ring/inputs.hpp"
#include "ring/parity.hpp"
#include "ring/allgather_attention.hpp"
#include "ring/group_transport.hpp"
#include "ring/hybrid_attention.hpp"
#include "ring/ring_attention.hpp"
#include "ring/transport.hpp"
#include "ring/ulysses_attention.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi.hpp"

namespace rbtest {

#ifdef RINGBENCH_GPU_TESTS
constexpr rb::Backend kPath = rb::Backend::Cuda;
#else
constexpr rb::Backend kPath = rb::Backend::Host;
#endif

// Collective on first use. NCCL refuses two ranks of one communicator on the same GPU, so
// with more ranks per node than GPUs the GPU path has nothing valid to test (rank 0 says so).
inline bool path_usable() {
  static const bool usable = [] {
    if (kPath == rb::Backend::Host) return true;
    const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
    int mine = layout.local_size <= rb::visible_gpu_count() ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) rb::select_gpu(layout.local_rank);
    if (!all && layout.rank == 0)
      std::printf(
          "ring tests skipped: %d ranks per node but %d GPU(s); NCCL needs one GPU per rank\n",
          layout.local_size, rb::visible_gpu_count());
    return all == 1;
  }();
  return usable;
}

inline const rb::PathFactories& paths() {
  static const rb::PathFactories f = rb::make_path_factories(kPath);
  return f;
}

// The largest max_rel a case may show. The host computes in fp32 on the rounded inputs at
// every storage dtype; the GPU computes in the dtype (the sweep's tolerances).
inline double tolerance(rb::attn::DType dtype) {
  return kPath == rb::Backend::Host ? 2e-5 : rb::ring::default_tolerance(dtype);
}

// Set by a test to run the ring (and hybrid's inner ring) on the copy-engine transport, and
// Ulysses' all-to-alls on the copy-engine group transport (GPU path).
inline bool& use_copy_engine() {
  static bool on = false;
  return on;
}

// Which of this rank's hops the copy engines take when use_copy_engine() is set (a test sets
// both false on some ranks to simulate a ring across nodes: NCCL moves those hops).
inline rb::ring::HopLinks& copy_engine_links() {
  static rb::ring::HopLinks links;
  return links;
}

inline std::unique_ptr<rb::ring::RingTransport> ring_transport(
    MPI_Comm comm, rb::attn::AttentionBackend& backend) {
  return use_copy_engine() ? paths().copy_engine_transport(comm, backend, copy_engine_links())
                           : paths().ring_transport(comm, backend);
}

// Backend, transport and scheme of one problem on `ring_comm`, released in reverse order.
struct RingSetup {
  std::unique_ptr<rb::attn::AttentionBackend> backend;
  std::unique_ptr<rb::ring::RingTransport> transport;
  std::unique_ptr<rb::ring::GroupTransport> group;
  std::unique_ptr<rb::ring::ContextParallelAttention> ring;
  RingSetup(const rb::ring::Problem& p, MPI_Comm ring_comm, bool backward,
            rb::ring::Scheme scheme = rb::ring::Scheme::Ring, int ulysses_degree = 1,
            int head_groups = 1)
      : backend(paths().attention_backend(rb::attn::KernelChoice{})) {
    if (scheme == rb::ring::Scheme::Hybrid) {  // as the sweep splits the group
      int rank = 0;
      MPI_Comm_rank(ring_comm, &rank);
      MPI_Comm heads, across;
      MPI_Comm_split(ring_comm, rank / ulysses_degree, rank % ulysses_degree, &heads);
      MPI_Comm_split(ring_comm, rank % ulysses_degree, rank / ulysses_degree, &across);
      group = paths().group_transport(heads, *backend);
      transport = ring_transport(across, *backend);
      MPI_Comm_free(&heads);
      MPI_Comm_free(&across);
      ring = std::make_unique<rb::ring::HybridAttention>(p, ulysses_degree, *backend, *transport,
                                                         *group, backward);
      return;
    }
    if (scheme == rb::ring::Scheme::Ring) {
      transport = ring_transport(ring_comm, *backend);
      ring = std::make_unique<rb::ring::RingAttention>(p, *backend, *transport, backward);
      return;
    }
    // Ulysses' all-to-alls by the copy engines when asked (as the sweep's transport: copy_engine).
    group = use_copy_engine() && scheme == rb::ring::Scheme::Ulysses
                ? paths().copy_engine_group_transport(ring_comm, *backend)
                : paths().group_transport(ring_comm, *backend);
    if (scheme == rb::ring::Scheme::AllGather)
      ring = std::make_unique<rb::ring::AllGatherAttention>(p, *backend, *group, backward);
    else
      ring =
          std::make_unique<rb::ring::UlyssesAttention>(p, *backend, *group, backward, head_groups);
  }
};

// A problem of `heads` heads of `head_dim` over `seq_len` positions on a ring of `ring_size`.
inline rb::ring::Problem problem(int ring_size, std::int64_t seq_len, int heads, int head_dim,
                                 rb::ring::Layout layout, bool causal) {
  rb::ring::Problem p;
  p.ring_size = ring_size;
  p.seq_len = seq_len;
  p.heads = heads;
  p.head_dim = head_dim;
  p.layout = layout;
  p.causal = causal;
  return p;
}

struct CaseResult {
  rb::ring::ParityReport parity;
  rb::ring::RingResult result;
};

inline std::string describe(const rb::ring::Problem& p) {
  std::string s = "S=" + std::to_string(p.seq_len) + " R=" + std::to_string(p.ring_size) +
                  " b=" + std::to_string(p.batch) + " h=" + std::to_string(p.heads) +
                  " d=" + std::to_string(p.head_dim) + " " + rb::ring::to_string(p.layout) +
                  (p.causal ? " causal" : " full") + " " + rb::ring::to_string(p.dtype);
  for (const auto& b : p.branches)
    s += " w" + std::to_string(b.segment) + "/r" + std::to_string(b.rate);
  return s;
}

// This rank's Q, K, V and dO shards of `seed` into the scheme.
inline void load_shards(rb::ring::ContextParallelAttention& ra, const rb::ring::Problem& p,
                        int rank, std::uint64_t seed) {
  using rb::ring::Tensor;
  const auto q = rb::ring::make_shard(p, rank, seed, Tensor::Q);
  const auto k = rb::ring::make_shard(p, rank, seed, Tensor::K);
  const auto v = rb::ring::make_shard(p, rank, seed, Tensor::V);
  const auto g = rb::ring::make_shard(p, rank, seed, Tensor::dO);
  ra.load_inputs(q.data(), k.data(), v.data(), g.data());
}

// `passes` forward and backward passes on one set-up, as warm-up and timed iterations reuse its
// transport (each pass must wait for the peers' reads of the last), then the parity check of
// the last pass.
inline rb::ring::ParityReport repeated_passes(const rb::ring::Problem& p, std::uint64_t seed,
                                              RingSetup& setup, MPI_Comm ring, int passes = 3) {
  int rank = 0;
  MPI_Comm_rank(ring, &rank);
  load_shards(*setup.ring, p, rank, seed);
  for (int i = 0; i < passes; ++i) {
    setup.ring->forward();
    setup.ring->backward();
  }
  return rb::ring::check_parity(p, seed, rank, ring, setup.ring->result(), true, {});
}

inline rb::ring::RingResult run_ring(const rb::ring::Problem& p, std::uint64_t seed, MPI_Comm ring,
                                     bool backward,
                                     rb::ring::Scheme scheme = rb::ring::Scheme::Ring,
                                     int ulysses_degree = 1, int head_groups = 1) {
  int rank = 0;
  MPI_Comm_rank(ring, &rank);
  RingSetup setup(p, ring, backward, scheme, ulysses_degree, head_groups);
  rb::ring::ContextParallelAttention& ra = *setup.ring;
  load_shards(ra, p, rank, seed);
  ra.forward();
  if (backward) ra.backward();
  return ra.result();
}

inline CaseResult run_case(const rb::ring::Problem& p, std::uint64_t seed, MPI_Comm ring,
                           bool backward, const rb::ring::ParityOptions& opt = {},
                           rb::ring::Scheme scheme = rb::ring::Scheme::Ring, int ulysses_degree = 1,
                           int head_groups = 1) {
  int rank = 0;
  MPI_Comm_rank(ring, &rank);
  CaseResult c;
  c.result = run_ring(p, seed, ring, backward, scheme, ulysses_degree, head_groups);
  c.parity = rb::ring::check_parity(p, seed, rank, ring, c.result, backward, opt);
  return c;
}

}  // namespace rbtest
