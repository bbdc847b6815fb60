#pragma once
// One step of a context-parallel scheme on the kernels: this rank's queries against one set of
// K/V rows, as the calls block_calls() chose, each one attn::ForwardBlock / BackwardBlock on the
// backend. Shared by the ring and all-gather schemes (Ulysses runs it over the whole sequence).
#include <cstddef>
#include <vector>

#include "backend.hpp"
#include "ring/block_calls.hpp"

namespace rb::ring {

struct StepKernels {
  attn::AttentionBackend& backend;
  attn::Dims dims;  // q_rows: this rank's rows, kv_rows: the rows of one K/V set
  attn::DType dtype = attn::DType::F32;
  float scale = 1.0f;
  const void* q = nullptr;         // [batch][heads][q_rows][head_dim] in dtype
  std::size_t kv_shard_bytes = 0;  // one of K or V in dtype: V follows K at this offset

  // out / lse: the running fp32 output and log-sum-exp of the q rows.
  void forward(const std::vector<BlockCall>& calls, const char* kv, float* out, float* lse) const;
  // dkdv: K then V gradients (fp32, kv_rows each) of this K/V set, accumulated.
  void backward(const std::vector<BlockCall>& calls, const char* kv, const void* dout,
                const float* lse, const float* delta, float* dq, float* dkdv) const;
};

}  // namespace rb::ring
