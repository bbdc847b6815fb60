// The ring's overlap calibration (issue #26 item 2): each hop's transfer alone and each ring
// step's block computation alone, to set against the timed iterations, where they overlap:
// overlap efficiency = 1 - exposed wait / transfers alone; kernel slowdown = step compute with
// transfers in flight / alone. Runs on this point's own buffers and transport after the parity
// check (it overwrites the results).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "metrics/stats.hpp"  // header-only: the medians every sweep reports
#include "ring/mpi_error.hpp"
#include "ring/ring_attention.hpp"

namespace rb::ring {
namespace {

std::vector<double> step_medians(const std::vector<std::vector<double>>& runs) {
  if (runs.empty()) return {};
  std::vector<double> out(runs[0].size());
  for (std::size_t s = 0; s < out.size(); ++s) {
    std::vector<double> at;
    for (const auto& run : runs) at.push_back(run[s]);
    out[s] = stats::median(at);
  }
  return out;
}

}  // namespace

// One exchange with nothing else queued, the ranks started together: from the post to the
// data being usable by the compute stream (GPU: stream marks; host: the host's clock).
double RingAttention::transfer_alone(MPI_Comm sync, std::size_t bytes) {
  throw_if_mpi_error(MPI_Barrier(sync), "ring overlap calibration", "MPI_Barrier");
  be_.reset_marks();
  const auto t0 = std::chrono::steady_clock::now();
  const int a = be_.mark();
  tr_.post(pkt_[1].ptr, pkt_[0].ptr, bytes);  // not counted in bytes_sent
  tr_.wait();
  const int b = be_.mark();
  const auto t1 = std::chrono::steady_clock::now();
  tr_.finish();
  be_.synchronize();
  return be_.on_device() ? be_.seconds_between(a, b)
                         : std::chrono::duration<double>(t1 - t0).count();
}

std::vector<double> RingAttention::forward_compute_alone() {
  const int R = p_.ring_size;
  be_.reset_marks();
  be_.init_forward(shards_.out.floats(), shards_.lse.floats(),
                   static_cast<std::int64_t>(shards_.rows), p_.head_dim);
  std::vector<int> marks{be_.mark()};
  for (int s = 0; s < R; ++s) {  // every owner's block shape, on this rank's own K/V
    compute_forward(shards_.kv.bytes(), kv_owner(rank_, s, R));
    marks.push_back(be_.mark());
  }
  be_.synchronize();
  std::vector<double> out;
  for (int s = 0; s < R; ++s) out.push_back(be_.seconds_between(marks[s], marks[s + 1]));
  return out;
}

// As the backward's steps count it: the block's kernels and the add into the travelling dK/dV.
std::vector<double> RingAttention::backward_compute_alone() {
  const int R = p_.ring_size;
  const std::size_t kv_bytes = 2 * shards_.kv_shard_bytes,
                    dkdv_floats = 2 * shards_.kv_shard_floats;
  be_.reset_marks();
  start_backward();
  std::vector<int> marks;
  float* partial = reinterpret_cast<float*>(pkt_[0].bytes() + kv_bytes);
  for (int s = 0; s < R; ++s) {
    be_.fill_zero(contrib_.ptr, dkdv_floats * sizeof(float));
    marks.push_back(be_.mark());
    compute_backward(shards_.kv.bytes(), backward_owner(s), contrib_.floats());
    be_.accumulate(partial, contrib_.floats(), dkdv_floats);
    marks.push_back(be_.mark());
  }
  be_.synchronize();
  std::vector<double> out;
  for (int s = 0; s < R; ++s) out.push_back(be_.seconds_between(marks[2 * s], marks[2 * s + 1]));
  return out;
}

std::optional<OverlapCalibration> RingAttention::calibrate_overlap(MPI_Comm sync, int repeats) {
  const int R = p_.ring_size;
  if (R == 1 || repeats < 1) return std::nullopt;
  const std::size_t kv = 2 * shards_.kv_shard_bytes,
                    dkdv = 2 * shards_.kv_shard_floats * sizeof(float);
  std::vector<double> hop, packet, partial;
  std::vector<std::vector<double>> fwd, bwd;
  for (int i = 0; i < repeats; ++i) {
    hop.push_back(transfer_alone(sync, kv));
    fwd.push_back(forward_compute_alone());
    if (!with_backward_) continue;
    packet.push_back(transfer_alone(sync, kv + dkdv));
    partial.push_back(transfer_alone(sync, dkdv));
    bwd.push_back(backward_compute_alone());
  }
  OverlapCalibration c;
  c.repeats = repeats;
  c.hop_transfer_alone_s = stats::median(hop);
  c.forward_transfer_alone_s = (R - 1) * c.hop_transfer_alone_s;
  c.step_compute_alone = step_medians(fwd);
  if (with_backward_) {
    // The backward's hops by size (backward_hop_bytes): K/V, K/V + dK/dV, or dK/dV.
    const double by_size[] = {c.hop_transfer_alone_s, stats::median(packet),
                              stats::median(partial)};
    for (int s = 0; s < R; ++s) {
      const std::size_t bytes = backward_hop_bytes(s);
      if (bytes > 0)
        c.backward_transfer_alone_s += by_size[bytes == kv ? 0 : bytes == kv + dkdv ? 1 : 2];
    }
    c.backward_step_compute_alone = step_medians(bwd);
  }
  return c;
}

}  // namespace rb::ring
