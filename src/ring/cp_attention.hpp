#pragma once
// Context-parallel attention: the sequence is sharded over the ranks of a group (the layout
// decides which positions each rank holds), and a scheme decides how every query meets every
// key. Each scheme starts from the same shards and ends with the same ones (this rank's O, LSE,
// dQ, and dK/dV of the keys it holds), so one parity check serves all:
//   ring       K/V blocks travel around the group, in flight while a block computes
//              (ring_attention.hpp);
//   allgather  K/V of every rank gathered at once, this rank's queries against all of them;
//              dK/dV reduce-scattered home (allgather_attention.hpp);
//   ulysses    all-to-all from sequence shards to head shards, one local attention over the
//              whole sequence for heads / group of the heads, all-to-all of O back; the
//              backward mirrors it (ulysses_attention.hpp);
//   hybrid     Ulysses inside subgroups of ulysses_degree consecutive ranks, the ring across
//              them (hybrid_attention.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

#include "ring/problem.hpp"

namespace rb::ring {

// Per step (ring: R ring steps; allgather: one per K/V owner; ulysses: one), seconds.
struct StepTimes {
  std::vector<double> compute;  // block kernels of the step (plus the dK/dV add in backward)
  std::vector<double> wait;     // exposed communication: time blocked waiting for data
};

// This rank's results as host arrays: out, dq, dk, dv [batch][heads][local_rows][head_dim],
// lse [batch][heads][local_rows]; the gradients stay empty without backward.
struct RingResult {
  std::vector<float> out, lse, dq, dk, dv;
};

// What the ring's transfers cost and how much of them the block computation hides (issue #26):
// measured after the timed iterations, one ring pass at a time with nothing else running.
// Medians over the repeats; a transfer's time runs from its post to the data being usable.
struct OverlapCalibration {
  int repeats = 0;
  double hop_transfer_alone_s = 0.0;       // one forward hop (this rank's K/V block)
  double forward_transfer_alone_s = 0.0;   // the forward's R - 1 hops, one after another
  double backward_transfer_alone_s = 0.0;  // the backward's hops (K/V, K/V + dK/dV, dK/dV home)
  std::vector<double> step_compute_alone, backward_step_compute_alone;  // per ring step
};

enum class Scheme { Ring, AllGather, Ulysses, Hybrid };
const char* to_string(Scheme s);
Scheme scheme_from_string(
    const std::string& s);  // throws std::invalid_argument naming the known ones
std::vector<std::string> scheme_names();

// Bytes one rank sends per iteration (forward, and backward when asked): what the cost model
// charges the link (ring: R - 1 hops of K and V, in the backward with dK/dV in fp32 and a final
// hop; all-gather: its ring share of the gather and of the dK/dV reduce-scatter; Ulysses: the
// other ranks' chunks of its all-to-alls).
// ulysses_degree: hybrid's subgroup size (ignored by the other schemes).
std::uint64_t bytes_sent_per_iteration(const Problem& p, Scheme s, bool backward,
                                       int ulysses_degree = 1);

class ContextParallelAttention {
 public:
  virtual ~ContextParallelAttention() = default;
  // Host arrays in p.dtype, [batch][heads][local_rows][head_dim]; dout may be null without
  // backward.
  virtual void load_inputs(const void* q, const void* k, const void* v, const void* dout) = 0;
  virtual void forward() = 0;
  virtual void backward() = 0;  // after forward()
  // Host copies of this rank's results (the gradients when constructed with backward).
  virtual RingResult result() const = 0;
  virtual const StepTimes& forward_steps() const = 0;
  virtual const StepTimes& backward_steps() const = 0;
  virtual std::uint64_t bytes_sent() const = 0;  // by this rank since construction / reset
  virtual void reset_bytes_sent() = 0;
  virtual const Problem& problem() const = 0;
  virtual Scheme scheme() const = 0;
  // The ring's overlap calibration (collective over `sync`, which every rank of the point's
  // groups is in); none for the other schemes (hybrid's steps also hold its all-to-alls, so a
  // ring-only calibration would not match them) and a ring of one. Overwrites the results:
  // call after result().
  virtual std::optional<OverlapCalibration> calibrate_overlap(MPI_Comm /*sync*/, int /*repeats*/) {
    return std::nullopt;
  }
};

}  // namespace rb::ring
