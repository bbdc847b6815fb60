#pragma once
// The all-gather scheme: every rank's K/V gathered at once (one collective, not overlapped with
// compute), this rank's queries against each owner's K/V in turn with the same block calls as
// the ring (so causal layouts balance the same way), and in the backward each owner's dK/dV
// contributions reduce-scattered (summed) home. Memory grows with the group: the gathered K/V
// (group x 2 shards in dtype) and, in the backward, group x 2 shards of fp32 contributions.
#include <cstdint>
#include <vector>

#include "ring/backend_buffer.hpp"
#include "ring/block_calls.hpp"
#include "ring/cp_attention.hpp"
#include "ring/group_transport.hpp"
#include "ring/kv_expansion.hpp"
#include "ring/step_kernels.hpp"

namespace rb::ring {

class AllGatherAttention final : public ContextParallelAttention {
 public:
  // Allocates every buffer up front (throws attn::OutOfMemory). The transport's group size
  // must equal p.ring_size; its group rank is this rank's position in the layout.
  AllGatherAttention(const Problem& p, attn::AttentionBackend& backend, GroupTransport& transport,
                     bool with_backward);

  void load_inputs(const void* q, const void* k, const void* v, const void* dout) override;
  void forward() override;
  void backward() override;
  RingResult result() const override;
  const StepTimes& forward_steps() const override { return fwd_; }
  const StepTimes& backward_steps() const override { return bwd_; }
  std::uint64_t bytes_sent() const override { return bytes_sent_; }
  void reset_bytes_sent() override { bytes_sent_ = 0; }
  const Problem& problem() const override { return p_; }
  Scheme scheme() const override { return Scheme::AllGather; }

 private:
  StepKernels kernels() const;
  // Seconds the collective took: between the backend marks on the device, the host's wait here.
  double collective_seconds(int before, int after, double host_wait);

  Problem p_;
  attn::AttentionBackend& be_;
  GroupTransport& tr_;
  bool with_backward_;
  int rank_ = 0;
  std::vector<std::vector<BlockCall>> calls_;  // per owner: this rank's calls on its K/V
  std::size_t shard_bytes_ = 0, shard_floats_ = 0, rows_ = 0;
  std::size_t kv_shard_bytes_ = 0, kv_shard_floats_ = 0;  // one of K/V (num_kv_heads heads)
  KvExpansion gqa_;  // K/V heads -> query heads for the kernels (GQA)
  BackendBuffer q_, home_kv_, kv_all_, out_, lse_, dout_, delta_, dq_, dkdv_all_, home_dkdv_;
  StepTimes fwd_, bwd_;
  std::uint64_t bytes_sent_ = 0;
  bool have_forward_ = false;
};

}  // namespace rb::ring
