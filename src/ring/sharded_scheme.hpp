#pragma once
// What every context-parallel scheme shares: this rank's shards on the backend (Q, K|V, dO in;
// O, LSE, dQ, dK|dV out, in the layout's rows), their loading and reading back, the per-step
// times and the bytes sent. A scheme derives from it and writes forward() and backward().
#include <cstdint>

#include "backend.hpp"
#include "ring/backend_buffer.hpp"
#include "ring/cp_attention.hpp"

namespace rb::ring {

// This rank's shards: K and V in one buffer (V at kv_shard_bytes), dK and dV in one (dV at
// kv_shard_floats), as the ring's packets and the all-gather want them.
struct Shards {
  Shards() = default;
  Shards(attn::AttentionBackend& be, const Problem& p, bool backward);  // throws attn::OutOfMemory
  std::size_t shard_bytes = 0, shard_floats = 0;        // Q, dO, O, dQ: [batch][heads][n][d]
  std::size_t kv_shard_bytes = 0, kv_shard_floats = 0;  // one of K, V, dK, dV: num_kv_heads heads
  std::size_t rows = 0;                                 // batch x heads x n: LSE
  BackendBuffer q, kv, dout, out, lse, dq, dkdv;
  char* k() const { return kv.bytes(); }
  char* v() const { return kv.bytes() + kv_shard_bytes; }
  float* dk() const { return dkdv.floats(); }
  float* dv() const { return dkdv.floats() + kv_shard_floats; }
};

class ShardedScheme : public ContextParallelAttention {
 public:
  void load_inputs(const void* q, const void* k, const void* v, const void* dout) override;
  RingResult result() const override;
  const StepTimes& forward_steps() const override { return fwd_; }
  const StepTimes& backward_steps() const override { return bwd_; }
  std::uint64_t bytes_sent() const override { return bytes_sent_; }
  void reset_bytes_sent() override { bytes_sent_ = 0; }
  const Problem& problem() const override { return p_; }

 protected:
  // Checks p (throws std::invalid_argument with problem_error) and allocates the shards.
  ShardedScheme(const Problem& p, attn::AttentionBackend& backend, bool with_backward,
                const char* name);
  // "NAME: transport group has G ranks, problem group size R" unless they agree.
  void check_group(int transport_size, int expected) const;
  // Steps of this scheme, zeroed: as many as the problem's ring size.
  void reset_steps(StepTimes& t) const;
  // backward() reuses what forward() left on the backend: "NAME: constructed without backward",
  // or "NAME: backward() before forward()" unless `have_forward` (std::logic_error).
  void check_backward(bool have_forward) const;

  Problem p_;
  attn::AttentionBackend& be_;
  bool with_backward_;
  const char* name_;
  Shards shards_;
  StepTimes fwd_, bwd_;
  std::uint64_t bytes_sent_ = 0;
};

}  // namespace rb::ring
