#pragma once
// Runs the ring algorithm (not the sweep) for one problem on a ring communicator and checks it
// against the double-precision reference; shared by the MPI tests.
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "host/host_backend.hpp"
#include "ring/transport.hpp"
#include "ring/inputs.hpp"
#include "ring/reference.hpp"
#include "ring/ring_attention.hpp"

namespace rbtest {

struct CaseResult {
  rb::ring::ParityReport parity;
  rb::ring::RingResult result;
  std::vector<double> fwd_compute;  // per step
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

inline rb::ring::RingResult run_ring(const rb::ring::Problem& p, std::uint64_t seed, MPI_Comm ring,
                                     bool backward) {
  int rank = 0;
  MPI_Comm_rank(ring, &rank);
  auto backend = rb::attn::make_host_backend();
  auto transport = rb::ring::make_mpi_transport(ring);
  rb::ring::RingAttention ra(p, *backend, *transport, backward);
  using rb::ring::Tensor;
  const auto q = rb::ring::make_shard(p, rank, seed, Tensor::Q);
  const auto k = rb::ring::make_shard(p, rank, seed, Tensor::K);
  const auto v = rb::ring::make_shard(p, rank, seed, Tensor::V);
  const auto g = rb::ring::make_shard(p, rank, seed, Tensor::dO);
  ra.load_inputs(q.data(), k.data(), v.data(), g.data());
  ra.forward();
  if (backward) ra.backward();
  rb::ring::RingResult r;
  const std::size_t n = static_cast<std::size_t>(p.shard_elements());
  r.out.resize(n);
  r.lse.resize(static_cast<std::size_t>(p.batch * p.heads * p.local_rows()));
  ra.read_output(r.out.data(), r.lse.data());
  if (backward) {
    r.dq.resize(n);
    r.dk.resize(n);
    r.dv.resize(n);
    ra.read_gradients(r.dq.data(), r.dk.data(), r.dv.data());
  }
  return r;
}

inline CaseResult run_case(const rb::ring::Problem& p, std::uint64_t seed, MPI_Comm ring,
                           bool backward) {
  int rank = 0;
  MPI_Comm_rank(ring, &rank);
  CaseResult c;
  c.result = run_ring(p, seed, ring, backward);
  c.parity = rb::ring::check_parity(p, seed, rank, ring, c.result, backward);
  return c;
}

}  // namespace rbtest
