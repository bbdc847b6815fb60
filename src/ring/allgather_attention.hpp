#pragma once
// The all-gather scheme: every rank's K/V gathered at once (one collective, not overlapped with
// compute), this rank's queries against each owner's K/V in turn with the same block calls as
// the ring (so causal layouts balance the same way), and in the backward each owner's dK/dV
// contributions reduce-scattered (summed) home. Memory grows with the group: the gathered K/V
// (group x 2 shards in dtype) and, in the backward, group x 2 shards of fp32 contributions.
#include <cstdint>
#include <vector>

#include "ring/backend_buffer.hpp"
#include "ring/group_transport.hpp"
#include "ring/kv_block_scheme.hpp"

namespace rb::ring {

class AllGatherAttention final : public KvBlockScheme {
 public:
  // Allocates every buffer up front (throws attn::OutOfMemory). The transport's group size
  // must equal p.ring_size; its group rank is this rank's position in the layout.
  AllGatherAttention(const Problem& p, attn::AttentionBackend& backend, GroupTransport& transport,
                     bool with_backward);

  void forward() override;
  void backward() override;
  Scheme scheme() const override { return Scheme::AllGather; }

 private:
  // Seconds the collective took: between the backend marks on the device, the host's wait here.
  double collective_seconds(int before, int after, double host_wait);

  GroupTransport& tr_;
  BackendBuffer kv_all_, dkdv_all_;
  bool have_forward_ = false;
};

}  // namespace rb::ring
