#pragma once
// The ring attention algorithm, written once against AttentionBackend and RingTransport.
//
// Forward: R steps. At step s ring rank r computes its queries against the K/V block of rank
// (r - s) mod R while the block for step s+1 is already in flight (receive posted before the
// compute; K and V packed in one message; two persistent receive buffers used alternately).
// Partial outputs merge by log-sum-exp into fp32 accumulators.
//
// Backward: dQ stays local. K/V travel the ring again, and dK/dV follow their K/V block one
// step behind: each step's contribution is computed into a scratch buffer while the partial
// sums of the visited ranks arrive, then added (fp32). The backward visits every other rank's
// block first, nearest first, and its own block last (backward_owner), so a block's partial
// sum reaches its owner during the owner's last step: no transfer is left to wait for after the
// last block. The first block (rank r - 1's) is the one the forward received first, kept from
// the forward (kv_prev_), so none waits before it either.
#include <cstdint>
#include <vector>

#include "ring/backend_buffer.hpp"
#include "ring/cp_attention.hpp"
#include "ring/kv_block_scheme.hpp"
#include "ring/transport.hpp"
#include "ring/problem.hpp"

namespace rb::ring {

class RingAttention final : public KvBlockScheme {
 public:
  // Allocates every persistent buffer up front (throws OutOfMemory). The transport's ring
  // size must equal p.ring_size.
  RingAttention(const Problem& p, AttentionBackend& backend, RingTransport& transport,
                bool with_backward);
  ~RingAttention() override;
  RingAttention(const RingAttention&) = delete;
  RingAttention& operator=(const RingAttention&) = delete;

  void forward() override;
  void backward() override;  // after forward()
  Scheme scheme() const override { return Scheme::Ring; }
  std::optional<OverlapCalibration> calibrate_overlap(MPI_Comm sync,
                                                      int repeats) override;  // ring_overlap.cpp

  // The ring's own buffers on the backend, for a scheme that fills and reads them there (hybrid):
  // inputs as load_inputs() takes them, results as result() returns them.
  struct DeviceTensors {
    char *q, *k, *v, *dout;
    float *out, *lse, *dq, *dk, *dv;
  };
  DeviceTensors device_tensors() const;

 private:
  using Buffer = BackendBuffer;

  void post(const void* send, void* recv, std::size_t bytes);
  // The rank whose K/V block the backward's step s computes on, and the bytes step s sends.
  int backward_owner(int s) const;
  std::size_t backward_hop_bytes(int s) const;
  // The overlap calibration's parts (ring_overlap.cpp).
  double transfer_alone(MPI_Comm sync, std::size_t bytes);
  std::vector<double> forward_compute_alone();
  std::vector<double> backward_compute_alone();

  RingTransport& tr_;
  Buffer contrib_;
  Buffer pkt_[2];
  Buffer kv_prev_;  // with backward: rank r - 1's K/V block, received at the forward's first step
  bool have_forward_ = false;
};

}  // namespace rb::ring
