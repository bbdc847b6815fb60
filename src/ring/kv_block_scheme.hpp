#pragma once
// What the ring and all-gather schemes share: each step computes this rank's queries against
// one owner's K/V block, with the same block calls in both (so causal layouts balance the same
// way), the K/V heads expanded for grouped-query attention, and the backward's delta.
#include <vector>

#include "backend.hpp"
#include "ring/backend_buffer.hpp"
#include "ring/block_calls.hpp"
#include "ring/kv_expansion.hpp"
#include "ring/sharded_scheme.hpp"
#include "ring/step_kernels.hpp"

namespace rb::ring {

class KvBlockScheme : public ShardedScheme {
 protected:
  // Checks the transport's group (group_size ranks, this rank at group_rank) against the
  // problem, then allocates the GQA and delta buffers (throws attn::OutOfMemory).
  KvBlockScheme(const Problem& p, attn::AttentionBackend& backend, bool with_backward,
                const char* name, int group_size, int group_rank);

  // This rank's output and LSE += its queries against owner's K|V block `kv`.
  void compute_forward(const char* kv, int owner);
  // After the forward: delta = rowsum(dO * O) and dQ zeroed, what every backward step reads.
  void start_backward();
  // This rank's dQ, and dkdv (owner's block's dK|dV, fp32), += its queries' share.
  void compute_backward(const char* kv, int owner, float* dkdv);

  int rank_ = 0;  // in the transport's group: the owner of this rank's K/V block

 private:
  StepKernels kernels() const;

  std::vector<std::vector<BlockCall>> calls_;  // per owner: this rank's calls on its K/V
  KvExpansion gqa_;                            // K/V heads -> query heads for the kernels (GQA)
  BackendBuffer delta_;
};

}  // namespace rb::ring
